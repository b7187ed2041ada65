"""Each pair's runs and snapshots, and the diffs of two snapshots.

A run is one conversion campaign of a service over a corpus; at most one is open per pair. A snapshot
freezes the status of every task of a pair at one moment, as two parallel arrays ordered by document
(docs/decisions/snapshots.md). The pair owns both: activating, extending, rerunning,
draining, deactivating and deleting open, close and remove them (corpora.pairs)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from corpora.models.corpora import Corpus


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
    # Frozen when the run closes: the pair's per-status counts (corpora.queries.corpora.status_counts) and the
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
    # True once the TaskDiff rows are written (corpora.actions.diffs.diff_rows_ensure).
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
