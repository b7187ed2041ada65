"""Services (registered converters). `init` and `import` are protected infrastructure services."""

from __future__ import annotations

from django.db import models

PROTECTED_SERVICES = ("init", "import")


class Service(models.Model):
    name = models.CharField(max_length=100, unique=True)
    version = models.CharField(max_length=50, default="0.1")
    inputformat = models.CharField(max_length=20, default="tex")
    outputformat = models.CharField(max_length=20, default="html")
    command = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    # Visibility timeout override; null falls back to the global dispatcher lease.
    lease_seconds = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_protected(self) -> bool:
        return self.name in PROTECTED_SERVICES
