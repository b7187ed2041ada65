"""Log messages of conversions. corpus_id and service_id are kept on each message (denormalized) so
report queries never join through tasks."""

from __future__ import annotations

from django.db import models

CATEGORY_MAX = 100
WHAT_MAX = 200
DETAILS_MAX = 2000


class Severity(models.TextChoices):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    FATAL = "fatal"


class LogMessage(models.Model):
    id = models.BigAutoField(primary_key=True)
    task = models.ForeignKey("corpora.Task", on_delete=models.DO_NOTHING, db_index=False)
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, db_index=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    category = models.CharField(max_length=CATEGORY_MAX)
    what = models.CharField(max_length=WHAT_MAX)
    details = models.CharField(max_length=DETAILS_MAX, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["task"], name="logmessage_task"),
            models.Index(fields=["corpus", "service", "severity", "category", "what"], name="logmessage_report"),
        ]

    def __str__(self) -> str:
        return f"{self.severity}:{self.category}:{self.what}"


class TaskRuntime(models.Model):
    """The conversion runtime of a task (from its Info:runtime_ms line), narrow for the runtime report."""

    task = models.OneToOneField("corpora.Task", on_delete=models.DO_NOTHING, primary_key=True)
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, db_index=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False)
    runtime_ms = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["corpus", "service", "-runtime_ms"], name="runtime_pair_slowest")]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.runtime_ms} ms"
