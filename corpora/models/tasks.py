"""Tasks (one per document and service), their per-status counts and their runtimes with the
runtime report's counts and bins."""

from __future__ import annotations

from django.db import models

from conversion.choices import TaskStatus
from corpora.models.corpora import Corpus, Document


class Task(models.Model):
    """One (corpus, service, document). Status: 0 TODO, >0 leased, -1..-5 results, <=-6 blocked."""

    # No database-level foreign keys on this table of millions of rows: PostgreSQL checks them one row
    # at a time, which dominated bulk activation (3 checks per task at COMMIT). The actions keep
    # integrity: tasks are only made from existing documents, and every delete removes children first.
    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    document = models.ForeignKey(Document, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    status = models.IntegerField(default=TaskStatus.TODO)
    # Lease bookkeeping (dispatcher): when the lease ends, the length captured at lease time, tries so far.
    leased_until = models.DateTimeField(null=True, blank=True)
    lease_seconds = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    # When the task last became TODO again within its run (a reaped lease, a result sent back by the
    # worker's governor); null while it is TODO since its run opened (created or rerun then). The queue
    # wait of the run's telemetry starts here (corpora.telemetry).
    todo_since = models.DateTimeField(null=True, blank=True)
    # The worker thread (its DEALER identity) that held the task when the machine last ended one of its
    # attempts (a governor's stop, the host's OOM killer, its worker's silence): the dispatcher hands the
    # retry to another worker where one asks (docs/decisions/infrastructure-failures.md). Null otherwise.
    last_worker = models.CharField(max_length=200, null=True, blank=True)
    # How long its conversion is expected to take, in ms: the pair's last runtime of the document, else the
    # service's median, set where tasks become TODO; leases go out longest-expected-first
    # (docs/decisions/cost-and-schedule.md).
    expected_ms = models.IntegerField(default=0, db_default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["service", "document"], name="task_unique_service_document")]
        indexes = [
            # The tasks of one status of a pair (a rerun of a severity, the run task lists), in id order.
            models.Index(fields=["corpus", "service", "status", "id"], name="task_pair_status_id"),
            # Deleting documents checks the tasks that reference each one: without this index every
            # check scans the whole (service, document) index, which makes a corpus delete quadratic.
            models.Index(fields=["document"], name="task_document"),
            # The dispatcher's two hot queries: the next TODO tasks of a service, and expired leases.
            models.Index(
                fields=["service", "id"], name="task_todo_by_service", condition=models.Q(status=TaskStatus.TODO)
            ),
            models.Index(
                fields=["service", "-expected_ms", "id"],
                name="task_todo_longest_first",
                condition=models.Q(status=TaskStatus.TODO),
            ),
            models.Index(
                fields=["leased_until"], name="task_leased_until", condition=models.Q(status__gt=TaskStatus.TODO)
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.pk} ({self.status})"


class TaskCount(models.Model):
    """Tasks per (corpus, service, status bucket), kept exact by statement-level triggers on the task
    table so that counts on a corpus of millions of tasks are a lookup, not a scan.
    Buckets: 1 stands for every lease mark (> 0), -6 for every blocked status (<= -6)."""

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, db_index=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False)
    bucket = models.IntegerField()
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["corpus", "service", "bucket"], name="taskcount_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.corpus_id}/{self.service_id}/{self.bucket}: {self.count}"


class PerTaskRow(models.Model):
    """The shape of the rows of one task that carry its document, pair and status (written with the task's
    messages, in the same transaction, and deleted before its status changes), so that a pair's rows of one
    status are one index range and no read joins the tasks: TaskClass and TaskPackage are such rows."""

    task_id = models.BigIntegerField()
    document_id = models.BigIntegerField()
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    task_status = models.SmallIntegerField()

    class Meta:
        abstract = True


class PairStatusTally(models.Model):
    """The shape of a pair's tallies of its tasks per status and one more key (`tally_key`, the subclass's
    field): per (corpus, service, task status, key) how many tasks. Kept exact by the message writer and
    deleter (corpora.message_store); MessageTally and PackageTally are such tallies."""

    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    task_status = models.SmallIntegerField()
    tasks = models.BigIntegerField()

    tally_key: str

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.corpus_id}/{self.service_id}/{self.task_status}/{getattr(self, self.tally_key)}: {self.tasks}"


class TaskRuntime(models.Model):
    """The conversion runtime of a task (from its Info:runtime_ms line), narrow for the runtime report, with
    its CPU time and peak resident memory (Info:cpu_ms, Info:peak_rss_kb) where the worker measured them."""

    task = models.OneToOneField(Task, on_delete=models.DO_NOTHING, primary_key=True, db_constraint=False)
    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    runtime_ms = models.IntegerField()
    cpu_ms = models.IntegerField(null=True, blank=True)
    peak_rss_kb = models.IntegerField(null=True, blank=True)

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
    Kept exact by statement-level triggers on the runtimes (reports migration 0007; corpora 0014 names
    their tables), as task counts are; rows that fall to zero stay and are skipped."""

    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    runtime_ms = models.IntegerField()
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["service", "runtime_ms"], name="runtimecount_unique_key")]

    def __str__(self) -> str:
        return f"{self.service_id}/{self.runtime_ms} ms: {self.count}"


# The width of a runtime bin (reports migration 0011 freezes it in its triggers). Every bound of the runtime
# report's histogram is a multiple of it, so each bin lies in one bucket.
RUNTIME_BIN_MS = 50


class RuntimeBin(models.Model):
    """How many tasks of a service took a runtime in [bin * RUNTIME_BIN_MS, (bin + 1) * RUNTIME_BIN_MS),
    and their summed runtimes: the runtime report's count, mean and histogram are summed from these few
    thousand rows, and each percentile is found in one bin before that bin's RuntimeCount rows are read.
    Kept exact by the triggers that keep RuntimeCount (reports migration 0011); rows that fall to zero stay."""

    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False)
    bin = models.IntegerField()
    count = models.BigIntegerField(default=0)
    total_ms = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["service", "bin"], name="runtimebin_unique_key")]

    def __str__(self) -> str:
        return f"{self.service_id}/{self.bin * RUNTIME_BIN_MS} ms: {self.count}"
