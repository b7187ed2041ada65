"""Corpora (incl. sandboxes), their documents, activations of services, tasks, and each pair's runs and
snapshots.

A run is one conversion campaign of a service over a corpus; at most one is open per pair. A snapshot
freezes the status of every task of a pair at one moment, as two parallel arrays ordered by document
(docs/decisions.md, "Runs and snapshots"). The pair owns both: activating, extending, rerunning,
draining, deactivating and deleting open, close and remove them (corpora.pairs). Their tables keep the
names they were created with (runs_run, runs_snapshot).

Tasks and their log messages reach millions of rows, so bulk work on them is raw set-based SQL and
their foreign keys do not cascade through Django (a Python cascade would load every row).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Collate, Lower

from conversion.choices import TaskStatus
from corpora.choices import CorpusState


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
            # the name itself breaking ties (docs/decisions.md, "Reading converted papers").
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

    class Meta:
        db_table = "runs_snapshot"
        ordering = ["-taken_at"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "service", "taken_at"], name="snapshot_unique_pair_time")
        ]

    def __str__(self) -> str:
        return f"snapshot {self.pk} of {self.service_id} on {self.corpus_id} at {self.taken_at}"


class SnapshotClass(models.Model):
    """Per snapshot and message class (reports.models.MessageClass, level 0) the pair then had: how many
    tasks had messages of the class and how many messages they were, summed over statuses from the
    reports' tallies."""

    pk = models.CompositePrimaryKey("snapshot_id", "message_class_id")
    snapshot_id = models.BigIntegerField()
    message_class_id = models.IntegerField()
    tasks = models.BigIntegerField()
    messages = models.BigIntegerField()

    class Meta:
        db_table = "runs_snapshotclass"

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
    what changed before it, not the class's size (docs/decisions.md, "Message classes in snapshots")."""

    pk = models.CompositePrimaryKey("snapshot_id", "message_class_id", "lo")
    snapshot_id = models.BigIntegerField()
    message_class_id = models.IntegerField()
    lo = models.BigIntegerField()
    hi = models.BigIntegerField()
    document_ids = ArrayField(models.BigIntegerField())

    class Meta:
        db_table = "runs_snapshotmembers"
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
        db_table = "runs_run"
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
