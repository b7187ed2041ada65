"""Diffs of snapshots.

Runs and snapshots belong to the pair that makes them (corpora.models.Run, corpora.models.Snapshot).
A diff of two snapshots is computed once and kept (snapshots never change): its matrix when first asked
for, and one row per document whose status changed when a task list first needs them, so that every
page of the task list is a few index ranges.
"""

from __future__ import annotations

from django.db import models


class SnapshotDiff(models.Model):
    """The comparison of two snapshots of one pair, computed on first use; its TaskDiff rows, written
    when a task list first needs them, list the documents whose status changed."""

    previous = models.ForeignKey("corpora.Snapshot", on_delete=models.DO_NOTHING, related_name="+")
    current = models.ForeignKey("corpora.Snapshot", on_delete=models.DO_NOTHING, related_name="+")
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
    UNLOGGED (migration 0002): it is derived data, written again after a crash empties it."""

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


class TelemetryBin(models.Model):
    """How many tasks of a run spent a duration in log-scale bin `bin` (corpora.telemetry.bin_bounds) in
    one stage (corpora.telemetry.STAGES). Written by the dispatcher's lease and ingestion statements
    (corpora.telemetry), an upsert per (run, stage, bin) of each batch; kept for a pair's open run and its
    latest closed one (corpora.telemetry.telemetry_trim). No foreign-key constraint: the rows go with
    their run wherever a run is deleted."""

    pk = models.CompositePrimaryKey("run", "stage", "bin")
    run = models.ForeignKey(
        "corpora.Run", on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    stage = models.SmallIntegerField()
    bin = models.SmallIntegerField()
    count = models.BigIntegerField()

    def __str__(self) -> str:
        return f"run {self.run_id} stage {self.stage} bin {self.bin}: {self.count}"


class TelemetryMinute(models.Model):
    """How many results of a run were applied in the minute starting at `minute`: the run's throughput
    and the rate of its ETA. Written and kept as TelemetryBin."""

    pk = models.CompositePrimaryKey("run", "minute")
    run = models.ForeignKey(
        "corpora.Run", on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    minute = models.DateTimeField()
    count = models.BigIntegerField()

    def __str__(self) -> str:
        return f"run {self.run_id} {self.minute}: {self.count}"
