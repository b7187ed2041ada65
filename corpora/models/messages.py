"""The tasks' log messages, their classes and tallies, and the report rollup (grains)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from conversion.logparse import CATEGORY_MAX, DETAILS_MAX, WHAT_MAX
from corpora.choices import MessageSeverity
from corpora.models.corpora import Corpus
from corpora.models.tasks import PairStatusTally, PerTaskRow, Task


class MessageClass(models.Model):
    """The dictionary of message classes: a (severity, category, what) of log messages (level 0), and the
    rollups the reports count, a (severity, category) (level 1, what '') and a severity (level 2, category
    and what ''). Append only: rows are never changed or deleted, so an id always names the same class."""

    id = models.AutoField(primary_key=True)
    level = models.SmallIntegerField()  # a ClassLevel (corpora/choices.py)
    severity = models.CharField(max_length=10, choices=MessageSeverity.choices)
    category = models.CharField(max_length=CATEGORY_MAX)
    what = models.CharField(max_length=WHAT_MAX)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["level", "severity", "category", "what"], name="messageclass_unique_key")
        ]

    def __str__(self) -> str:
        return f"{self.severity}:{self.category}:{self.what}"


class TaskMessages(models.Model):
    """Every log message of one task, in one row (docs/decisions/message-storage.md).

    `classes` holds the task's distinct message classes in the order they first appear and `counts` the
    messages of each; `rollups` and `rollup_counts` the same for its (severity, category) and severity
    rollup classes. The messages in log order are `sequence` (a 1-based index into `classes`) and
    `details` (one per message, '' when none). Like message rows before, the row carries its task's
    final status, is written in the same transaction as that status and deleted before it changes
    (corpora.message_store); corpus and service are kept so that no report joins through the tasks.
    Written only by corpora.message_store's message writer, with the task's pair rows and tallies."""

    task = models.OneToOneField(
        Task, on_delete=models.DO_NOTHING, primary_key=True, db_constraint=False, related_name="+"
    )
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    task_status = models.SmallIntegerField()
    classes = ArrayField(models.IntegerField())
    counts = ArrayField(models.IntegerField())
    rollups = ArrayField(models.IntegerField())
    rollup_counts = ArrayField(models.IntegerField())
    sequence = ArrayField(models.IntegerField())
    details = ArrayField(models.TextField())
    # The task's package usages (PackageUsage ids), so that the deleter and a rerun take them off the package
    # tallies from this row alone, as they take its classes off the message tallies.
    packages = ArrayField(models.IntegerField(), db_default="{}")

    def __str__(self) -> str:
        return f"messages of task {self.task_id}"


class TaskClass(PerTaskRow):
    """That a task has messages of a class (level 0): one row per (task, class). The key is the report
    index: the tasks of one status with one class are one range of it, in task order (entry lists, rerun
    and sandbox scopes). The task's document is in the row and, included, in the key's index: a snapshot
    reads each class's documents from the index alone (reports migration 0013 adds the INCLUDE, which the model
    cannot state). The task index finds a task's rows when its messages are deleted."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "task_status", "message_class_id", "task_id")
    message_class_id = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["task_id"], name="taskclass_task")]

    def __str__(self) -> str:
        return f"task {self.task_id} has class {self.message_class_id}"


class StaleMessages(models.Model):
    """A task whose messages a rerun retired: its task row and (task, class) rows are still there, but
    the tallies no longer count them and no report shows them; the purge deletes them later, in batches,
    and the message deleter deletes them first when the task's next result comes. Only tasks in
    progress (TODO, leased or blocked) have retired messages (docs/decisions/rerun.md)."""

    task_id = models.BigIntegerField(primary_key=True)
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["corpus_id", "service_id"], name="stalemessages_pair")]

    def __str__(self) -> str:
        return f"task {self.task_id}'s messages are retired"


class MessageTally(PairStatusTally):
    """Per (corpus, service, task status, class or rollup): how many tasks have such messages and how many
    messages they are. Kept exact by the message writer and deleter (corpora.message_store), so report slices
    are built from these rows, never from the messages. Rows that fall to zero stay and are skipped."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "task_status", "message_class_id")
    message_class_id = models.IntegerField()
    messages = models.BigIntegerField()

    tally_key = "message_class_id"


class LogMessage(models.Model):
    """One log message, read only: a row of the view `corpora_logmessage`, which unfolds the task rows
    (TaskMessages) into their messages in log order (reports migration 0010). For reads that want messages one
    by one; every write goes through corpora.message_store's message writer."""

    pk = models.CompositePrimaryKey("task_id", "position")
    task = models.ForeignKey(Task, on_delete=models.DO_NOTHING, db_constraint=False)
    position = models.IntegerField()
    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, db_constraint=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_constraint=False)
    task_status = models.SmallIntegerField()
    severity = models.CharField(max_length=10, choices=MessageSeverity.choices)
    category = models.CharField(max_length=CATEGORY_MAX)
    what = models.CharField(max_length=WHAT_MAX)
    details = models.CharField(max_length=DETAILS_MAX, blank=True)

    class Meta:
        managed = False

    def __str__(self) -> str:
        return f"{self.severity}:{self.category}:{self.what}"


class ReportGrain(models.Model):
    """Rollup of messages for one (corpus, service, severity) slice: one row per (category, what),
    one per category (what null) and the slice total (both null). Built with GROUP BY ROLLUP."""

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
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

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, db_index=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False)
    severity = models.CharField(max_length=12)
    built_at = models.DateTimeField(auto_now_add=True)
    build_ms = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "service", "severity"], name="grainslice_unique_key")]

    def __str__(self) -> str:
        return f"{self.corpus_id}/{self.service_id}/{self.severity}"
