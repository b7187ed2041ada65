"""Corpora (incl. sandboxes), their documents, activations of services, tasks, each pair's runs and
snapshots, the tasks' log messages and runtimes with their tallies and counts, the report rollup
(grains), the runs' telemetry and the diffs of snapshots: every table that corpora's modules write
(docs/architecture.md, "Each table sits with its writer").

A run is one conversion campaign of a service over a corpus; at most one is open per pair. A snapshot
freezes the status of every task of a pair at one moment, as two parallel arrays ordered by document
(docs/decisions/snapshots.md). The pair owns both: activating, extending, rerunning,
draining, deactivating and deleting open, close and remove them (corpora.pairs).

Tasks and their log messages reach millions of rows, so bulk work on them is raw set-based SQL and
their foreign keys do not cascade through Django (a Python cascade would load every row).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Collate, Lower

from conversion.attribution import NAME_MAX as PACKAGE_NAME_MAX
from conversion.choices import TROUBLE_FROM, TaskStatus
from conversion.logparse import CATEGORY_MAX, DETAILS_MAX, WHAT_MAX
from corpora.choices import PACKAGE_KINDS, CorpusState, MessageSeverity


class Corpus(models.Model):
    name = models.CharField(max_length=100, unique=True)
    path = models.CharField(max_length=4096)
    description = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=CorpusState.choices, default=CorpusState.IMPORTING)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="sandboxes")
    # A sandbox's SandboxRequest as it was accepted (its parent's path is its path); null on an imported corpus.
    condition = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "corpora"

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One entry of the corpus directory: a sub-directory, a lone .tex, a .zip, a .tar.gz or a .gz."""

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, related_name="documents")
    name = models.CharField(max_length=255)
    entry = models.CharField(max_length=1024)
    kind = models.CharField(max_length=10)
    main_file = models.CharField(max_length=1024, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["corpus", "name"], name="document_unique_name"),
            models.UniqueConstraint(fields=["corpus", "entry"], name="document_unique_entry"),
        ]
        indexes = [
            # A corpus's document list, in the order of its names folded to lower case, and the search of
            # a name prefix in it (LIKE 'prefix%' on a "C"-collated key is a range of this index), with
            # the name itself breaking ties (docs/decisions/reading-converted-papers.md).
            models.Index(F("corpus"), Collate(Lower("name"), "C"), F("name"), name="document_name_folded"),
        ]

    def __str__(self) -> str:
        return self.name


class Activation(models.Model):
    """A service registered on a corpus."""

    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, related_name="activations")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="activations")
    actor = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["corpus", "service"], name="activation_unique_pair")]

    def __str__(self) -> str:
        return f"{self.service_id} on {self.corpus_id}"


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


class Snapshot(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, related_name="+")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="+")
    taken_at = models.DateTimeField()
    tasks = models.IntegerField(help_text="rows appended: one per task of the pair")
    # document_ids ascending; statuses[i] is the count bucket (corpora.statuses) of document_ids[i]'s task.
    document_ids = ArrayField(models.BigIntegerField())
    statuses = ArrayField(models.SmallIntegerField())
    # Whether the snapshot froze its message classes too (SnapshotClass, SnapshotMembers): those taken
    # before the reports could compare classes did not.
    with_classes = models.BooleanField(default=False, db_default=False)
    # The documents whose task then ended as an infrastructure failure (a Fatal:infrastructure class, or
    # CorTeX's own: corpora.statuses.infrastructure_class_sql), ascending: few, so a run diff can leave them out.
    infrastructure_document_ids = ArrayField(
        models.BigIntegerField(),
        default=list,
        db_default=models.Value([], output_field=ArrayField(models.BigIntegerField())),
    )

    class Meta:
        ordering = ["-taken_at"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "service", "taken_at"], name="snapshot_unique_pair_time")
        ]

    def __str__(self) -> str:
        return f"snapshot {self.pk} of {self.service_id} on {self.corpus_id} at {self.taken_at}"


class SnapshotClass(models.Model):
    """Per snapshot and message class (MessageClass, level 0) the pair then had: how many
    tasks had messages of the class and how many messages they were, summed over statuses from the
    reports' tallies."""

    pk = models.CompositePrimaryKey("snapshot_id", "message_class_id")
    snapshot_id = models.BigIntegerField()
    message_class_id = models.IntegerField()
    tasks = models.BigIntegerField()
    messages = models.BigIntegerField()

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id}, class {self.message_class_id}: {self.tasks} tasks"


# A member of a class whose hash (hashint8) is 0 modulo MEMBERS_CHUNK ends its chunk: a chunk holds
# MEMBERS_CHUNK documents on average, and its ends depend only on the documents themselves. A power of
# two (the snapshot masks the hash with MEMBERS_CHUNK - 1).
MEMBERS_CHUNK = 512


class SnapshotMembers(models.Model):
    """Which documents had messages of a class of warning severity or worse, per snapshot and class, in
    chunks: each row an ascending array of document ids from `lo` to `hi`. Chunk ends are chosen by the
    documents' hashes (content-defined), so where two snapshots' members of a class agree their chunks are
    equal and are passed over when the documents that gained or lost the class are listed: a page costs
    what changed before it, not the class's size (docs/decisions/message-classes-in-snapshots.md)."""

    pk = models.CompositePrimaryKey("snapshot_id", "message_class_id", "lo")
    snapshot_id = models.BigIntegerField()
    message_class_id = models.IntegerField()
    lo = models.BigIntegerField()
    hi = models.BigIntegerField()
    document_ids = ArrayField(models.BigIntegerField())

    class Meta:
        # A document's classes in the snapshots of its pair (its history): the chunks that may hold it.
        indexes = [models.Index(fields=["snapshot_id", "hi"], include=["lo"], name="snapshotmembers_hi")]

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id}, class {self.message_class_id}, documents {self.lo}..{self.hi}"


class Run(models.Model):
    corpus = models.ForeignKey(Corpus, on_delete=models.DO_NOTHING, related_name="runs")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="runs")
    owner = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Frozen when the run closes: the pair's per-status counts (corpora.queries.status_counts) and the
    # snapshot taken at that moment.
    tallies = models.JSONField(null=True, blank=True)
    snapshot = models.ForeignKey(Snapshot, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")
    # The service's converter profile when the run opened (conversion.profiles), in full and as the sha256 of
    # its canonical JSON, and its engine; every profile hash the service had while the run was open (more than
    # one: the profile changed mid-run); the versions the fleet's workers reported for that engine meanwhile
    # (two when the fleet was mixed). Null and empty for a run opened before runs recorded them.
    engine = models.CharField(max_length=1024, blank=True, default="", db_default="")
    profile = models.JSONField(null=True, blank=True)
    profile_hash = models.CharField(max_length=64, blank=True, default="", db_default="")
    profile_hashes = ArrayField(
        models.CharField(max_length=64),
        default=list,
        db_default=models.Value([], output_field=ArrayField(models.CharField(max_length=64))),
    )
    engine_versions = ArrayField(
        models.CharField(max_length=200),
        default=list,
        db_default=models.Value([], output_field=ArrayField(models.CharField(max_length=200))),
    )

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["corpus", "service"], name="run_one_open_per_pair", condition=Q(finished_at__isnull=True)
            )
        ]
        indexes = [
            models.Index(fields=["-started_at", "-id"], name="run_newest"),
            models.Index(fields=["corpus", "service", "-started_at"], name="run_pair_newest"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.service_id} on {self.corpus_id}"


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


class TaskClass(models.Model):
    """That a task has messages of a class (level 0): one row per (task, class). The key is the report
    index: the tasks of one status with one class are one range of it, in task order (entry lists, rerun
    and sandbox scopes). The task's document is in the row and, included, in the key's index: a snapshot
    reads each class's documents from the index alone (reports migration 0013 adds the INCLUDE, which the model
    cannot state). The task index finds a task's rows when its messages are deleted."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "task_status", "message_class_id", "task_id")
    task_id = models.BigIntegerField()
    document_id = models.BigIntegerField()
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    message_class_id = models.IntegerField()
    task_status = models.SmallIntegerField()

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


class MessageTally(models.Model):
    """Per (corpus, service, task status, class or rollup): how many tasks have such messages and how many
    messages they are. Kept exact by the message writer and deleter (corpora.message_store), so report slices
    are built from these rows, never from the messages. Rows that fall to zero stay and are skipped."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "task_status", "message_class_id")
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    task_status = models.SmallIntegerField()
    message_class_id = models.IntegerField()
    tasks = models.BigIntegerField()
    messages = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.corpus_id}/{self.service_id}/{self.task_status}/{self.message_class_id}: {self.tasks}"


class TaskPackage(models.Model):
    """What one task's log says about one package or class it used (conversion/attribution.py): its
    evidence and verdicts as PackageFlag bits, and the task's error and fatal messages located in it.
    Written by corpora.message_store's message writer with the task's messages, in the same transaction,
    and deleted with them; like them it carries the task's status, document and pair, so the ranking of a
    pair is one index range (docs/decisions/package-attribution.md)."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "kind", "package", "task_id")
    task_id = models.BigIntegerField()
    document_id = models.BigIntegerField()
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    task_status = models.SmallIntegerField()
    kind = models.CharField(max_length=10, choices=PACKAGE_KINDS.choices)
    package = models.CharField(max_length=PACKAGE_NAME_MAX)
    flags = models.SmallIntegerField()
    errors = models.IntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["task_id"], name="taskpackage_task"),
            # The rows that show trouble (conversion.choices.TROUBLE_FROM), a few of them, each package's
            # in document order with what a snapshot freezes: the snapshot reads them from this index alone.
            models.Index(
                fields=["corpus_id", "service_id", "kind", "package", "document_id"],
                include=["task_status", "flags"],
                condition=Q(flags__gte=TROUBLE_FROM),
                name="taskpackage_trouble",
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.task_id} used {self.kind} {self.package}"


class PackageUsage(models.Model):
    """The dictionary of package usages: a package or class with the PackageFlag bits one task's log gave it.
    Append only, like MessageClass: an id always names the same usage."""

    id = models.AutoField(primary_key=True)
    kind = models.CharField(max_length=10, choices=PACKAGE_KINDS.choices)
    package = models.CharField(max_length=PACKAGE_NAME_MAX)
    flags = models.SmallIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "package", "flags"], name="packageusage_unique_key")]

    def __str__(self) -> str:
        return f"{self.kind} {self.package} ({self.flags})"


class PackageTally(models.Model):
    """Per (corpus, service, task status, package usage): how many tasks have that usage. Kept exact by the
    message writer and deleter with TaskPackage, so a pair's ranking sums these rows, a few per package,
    never the tasks' rows (docs/decisions/package-attribution.md). Rows that fall to zero stay and are
    skipped."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "task_status", "package_usage_id")
    corpus_id = models.IntegerField()
    service_id = models.IntegerField()
    task_status = models.SmallIntegerField()
    package_usage_id = models.IntegerField()
    tasks = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.corpus_id}/{self.service_id}/{self.task_status}/{self.package_usage_id}: {self.tasks}"


class SnapshotPackage(models.Model):
    """One package or class of a snapshot (corpora.pairs): its tallies, what a ranking of the snapshot sums,
    the tasks per (flags, status); and the documents whose tasks showed trouble with it (flags from
    TROUBLE_FROM up), ascending, with each one's task status and PackageFlag bits. Each in parallel arrays."""

    pk = models.CompositePrimaryKey("snapshot_id", "kind", "package")
    snapshot_id = models.BigIntegerField()
    kind = models.CharField(max_length=10, choices=PACKAGE_KINDS.choices)
    package = models.CharField(max_length=PACKAGE_NAME_MAX)
    document_ids = ArrayField(models.BigIntegerField())
    statuses = ArrayField(models.SmallIntegerField())
    flags = ArrayField(models.SmallIntegerField())
    tally_flags = ArrayField(models.SmallIntegerField(), db_default="{}")
    tally_statuses = ArrayField(models.SmallIntegerField(), db_default="{}")
    tally_tasks = ArrayField(models.IntegerField(), db_default="{}")

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id}: {self.kind} {self.package}"


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


class SnapshotDiff(models.Model):
    """The comparison of two snapshots of one pair, computed on first use; its TaskDiff rows, written
    when a task list first needs them, list the documents whose status changed."""

    previous = models.ForeignKey(Snapshot, on_delete=models.DO_NOTHING, related_name="+")
    current = models.ForeignKey(Snapshot, on_delete=models.DO_NOTHING, related_name="+")
    # [[previous status, current status, count], ...] over every document of either snapshot.
    matrix = models.JSONField()
    # The same over the documents that were an infrastructure failure in either snapshot (their
    # infrastructure_document_ids): the matrix without them is the difference.
    infrastructure_matrix = models.JSONField(default=list, db_default=models.Value([], output_field=models.JSONField()))
    changed = models.IntegerField()
    # True once the TaskDiff rows are written (corpora.diffs.diff_rows_ensure).
    rows_ready = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["previous", "current"], name="snapshotdiff_unique_pair")]

    def __str__(self) -> str:
        return f"diff {self.previous_id} -> {self.current_id}"


class TaskDiff(models.Model):
    """A document whose status differs between the two snapshots of a diff. Statuses are count buckets
    (corpora.statuses), ABSENT_BUCKET where the document is missing from that snapshot; the key orders
    a diff's rows by transition, then document, so that a page is a few index ranges. The table is
    UNLOGGED (runs migration 0002): it is derived data, written again after a crash empties it."""

    pk = models.CompositePrimaryKey("diff", "previous_status", "current_status", "document_id")
    # No foreign-key constraint: checking it on a million rows doubled the write (bench/README.md, runs);
    # a diff's rows go with it (corpora.pairs: data_purge, history_remove).
    diff = models.ForeignKey(
        SnapshotDiff, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    previous_status = models.SmallIntegerField()
    current_status = models.SmallIntegerField()
    document_id = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.document_id}: {self.previous_status} -> {self.current_status}"


class TelemetryBin(models.Model):
    """How many tasks of a run spent a duration in log-scale bin `bin` (corpora.telemetry.bin_bounds) in
    one stage (corpora.choices.Stage). Written by the dispatcher's lease and ingestion statements
    (corpora.telemetry), an upsert per (run, stage, bin) of each batch; kept for a pair's open run and its
    latest closed one (corpora.telemetry.telemetry_trim). No foreign-key constraint: the rows go with
    their run wherever a run is deleted."""

    pk = models.CompositePrimaryKey("run", "stage", "bin")
    run = models.ForeignKey(Run, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False)
    stage = models.SmallIntegerField()
    bin = models.SmallIntegerField()
    count = models.BigIntegerField()

    def __str__(self) -> str:
        return f"run {self.run_id} stage {self.stage} bin {self.bin}: {self.count}"


class TelemetryMinute(models.Model):
    """How many results of a run were applied in the minute starting at `minute`: the run's throughput
    and the rate of its ETA; and the CPU time of those that carried one (`cpu_results` of them), the run's
    cost. Written and kept as TelemetryBin."""

    pk = models.CompositePrimaryKey("run", "minute")
    run = models.ForeignKey(Run, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False)
    minute = models.DateTimeField()
    count = models.BigIntegerField()
    cpu_ms = models.BigIntegerField(default=0, db_default=0)
    cpu_results = models.BigIntegerField(default=0, db_default=0)

    def __str__(self) -> str:
        return f"run {self.run_id} {self.minute}: {self.count}"


class Experiment(models.Model):
    """A profile experiment (docs/decisions/profile-experiments.md): the papers of a pair (`corpus`, `service`)
    that were not error-free, carved into the sandbox corpus `sandbox`, converted by each variant's service.
    The names are kept beside the references, which a deletion of the corpus, the sandbox or the service sets
    to null (corpora.pairs.data_purge), so the experiment stays in the history."""

    name = models.CharField(max_length=100, unique=True)
    corpus = models.ForeignKey(Corpus, null=True, on_delete=models.DO_NOTHING, related_name="+")
    service = models.ForeignKey("services.Service", null=True, on_delete=models.DO_NOTHING, related_name="+")
    sandbox = models.ForeignKey(Corpus, null=True, on_delete=models.DO_NOTHING, related_name="+")
    corpus_name = models.CharField(max_length=100)
    service_name = models.CharField(max_length=100)
    # The pair's service profile when the experiment started (conversion.profiles.Profile.as_json): the base
    # each variant's changes were applied over.
    profile = models.JSONField()
    actor = models.CharField(max_length=100)
    # The job that carves the sandbox and activates the variants (jobs.models.Job.uuid).
    job_uuid = models.UUIDField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class ExperimentVariant(models.Model):
    """One variant of an experiment: its name, the options it changes over the experiment's profile, and the
    service registered with the result (named `<experiment>.<variant>`), activated on the sandbox."""

    experiment = models.ForeignKey(Experiment, on_delete=models.DO_NOTHING, related_name="variants")
    name = models.CharField(max_length=100)
    changes = models.JSONField()
    service = models.ForeignKey("services.Service", null=True, on_delete=models.DO_NOTHING, related_name="+")
    service_name = models.CharField(max_length=100)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["experiment", "name"], name="experimentvariant_unique_name")]

    def __str__(self) -> str:
        return f"{self.experiment_id}/{self.name}"
