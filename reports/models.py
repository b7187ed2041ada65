"""Report data: log messages of conversions, per-task runtimes and their trigger-kept counts, and the
rollup of grains with its built slices. corpus_id and service_id are kept on each message
(denormalized) so report queries never join through tasks."""

from __future__ import annotations

from django.db import models

from conversion.severities import Severity

CATEGORY_MAX = 100
WHAT_MAX = 200
DETAILS_MAX = 2000
SEVERITY_CHOICES = [(severity, severity.title()) for severity in Severity.ALL]


class LogMessage(models.Model):
    # Like tasks, messages (tens of millions) carry no database-level foreign keys; see corpora.Task.
    id = models.BigAutoField(primary_key=True)
    task = models.ForeignKey("corpora.Task", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    severity = models.CharField(max_length=10, choices=SEVERITY_CHOICES)
    category = models.CharField(max_length=CATEGORY_MAX)
    what = models.CharField(max_length=WHAT_MAX)
    details = models.CharField(max_length=DETAILS_MAX, blank=True)
    # The status of the task, written with the message. It cannot go stale: messages exist only for tasks
    # with a final status, they are written in the same statement or transaction as that status
    # (ingestion, the reaper, import), and every change of a final status (rerun, a new result) deletes
    # them first. A report of one status then needs no join with the tasks. The table is partitioned by
    # it (migration 0009: one partition per final status, and a default one), with the primary key
    # (id, task_status) in the database; a message never moves between partitions.
    task_status = models.SmallIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["task"], name="logmessage_task"),
            # Serves the grain rollups, the entry lists (which page through one status's tasks in index
            # order) and the rerun's scope, each one range of it, without a look at the tasks.
            models.Index(
                fields=["corpus", "service", "task_status", "severity", "category", "what", "task"],
                name="logmessage_report_status",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.severity}:{self.category}:{self.what}"


class TaskRuntime(models.Model):
    """The conversion runtime of a task (from its Info:runtime_ms line), narrow for the runtime report."""

    task = models.OneToOneField("corpora.Task", on_delete=models.DO_NOTHING, primary_key=True, db_constraint=False)
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    runtime_ms = models.IntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["corpus", "service", "-runtime_ms"], name="runtime_pair_slowest"),
            # The runtime report (one service, all corpora) reads its percentiles, the slowest page and,
            # index-only, its aggregates from this one, in runtime order.
            models.Index(fields=["service", "-runtime_ms", "task"], name="runtime_service_slowest"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.runtime_ms} ms"


class RuntimeCount(models.Model):
    """How many tasks of a service took each runtime (ms), over all corpora: the runtime report's count,
    mean, maximum, histogram and percentiles come from these few rows, not from a million runtimes.
    Kept exact by statement-level triggers on `reports_taskruntime` (migration 0007), as task counts
    are; rows that fall to zero stay and are skipped."""

    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    runtime_ms = models.IntegerField()
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["service", "runtime_ms"], name="runtimecount_unique_key")]

    def __str__(self) -> str:
        return f"{self.service_id}/{self.runtime_ms} ms: {self.count}"


class ReportGrain(models.Model):
    """Rollup of messages for one (corpus, service, severity) slice: one row per (category, what),
    one per category (what null) and the slice total (both null). Built with GROUP BY ROLLUP."""

    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    severity = models.CharField(max_length=12)
    category = models.CharField(max_length=CATEGORY_MAX, null=True)
    what = models.CharField(max_length=WHAT_MAX, null=True)
    task_count = models.BigIntegerField()
    message_count = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(
                fields=["corpus", "service", "severity", "category", "-task_count"], name="grain_slice_by_tasks"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.severity}:{self.category}:{self.what} {self.task_count}/{self.message_count}"


class GrainSlice(models.Model):
    """That a (corpus, service, severity) slice of grains is built, and when; absent means stale."""

    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, db_index=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False)
    severity = models.CharField(max_length=12)
    built_at = models.DateTimeField(auto_now_add=True)
    build_ms = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "service", "severity"], name="grainslice_unique_key")]

    def __str__(self) -> str:
        return f"{self.corpus_id}/{self.service_id}/{self.severity}"
