"""Runs and snapshots.

A run is one conversion campaign of a service over a corpus; at most one is open per pair. A snapshot
freezes the status of every task of a pair at one moment, as two parallel arrays ordered by document
(docs/decisions.md, "Runs and snapshots"). A diff of two snapshots is computed once and kept (snapshots
never change): its matrix when first asked for, and one row per document whose status changed when a
task list first needs them, so that every page of the task list is a few index ranges.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q


class Snapshot(models.Model):
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, related_name="+")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="+")
    taken_at = models.DateTimeField()
    tasks = models.IntegerField(help_text="rows appended: one per task of the pair")
    # document_ids ascending; statuses[i] is the count bucket (corpora.statuses) of document_ids[i]'s task.
    document_ids = ArrayField(models.BigIntegerField())
    statuses = ArrayField(models.SmallIntegerField())

    class Meta:
        ordering = ["-taken_at"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "service", "taken_at"], name="snapshot_unique_pair_time")
        ]

    def __str__(self) -> str:
        return f"snapshot {self.pk} of {self.service_id} on {self.corpus_id} at {self.taken_at}"


class Run(models.Model):
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, related_name="runs")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="runs")
    owner = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Frozen when the run closes: the pair's per-status counts (corpora.queries.status_counts) and the
    # snapshot taken at that moment.
    tallies = models.JSONField(null=True, blank=True)
    snapshot = models.ForeignKey(Snapshot, on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+")

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
    changed = models.IntegerField()
    # True once the TaskDiff rows are written (runs.actions.diff_rows_ensure).
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
    UNLOGGED (migration 0003): it is derived data, written again after a crash empties it."""

    pk = models.CompositePrimaryKey("diff", "previous_status", "current_status", "document_id")
    # No foreign-key constraint: checking it on a million rows doubled the write (bench/README.md, runs);
    # a diff's rows go with it (runs_delete_for, history_prune).
    diff = models.ForeignKey(
        SnapshotDiff, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    previous_status = models.SmallIntegerField()
    current_status = models.SmallIntegerField()
    document_id = models.BigIntegerField()

    def __str__(self) -> str:
        return f"{self.document_id}: {self.previous_status} -> {self.current_status}"
