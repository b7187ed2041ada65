from django.db import models


class ConfigOverride(models.Model):
    """A configuration value set through the API or `manage.py config set`; it wins over the environment."""

    key = models.CharField(max_length=100, primary_key=True)  # dotted name, e.g. dispatcher.max_in_flight
    value = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.key


class ConfigVersion(models.Model):
    """One row: bumped with every change of the overrides, polled by every process to pick them up."""

    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return str(self.version)
