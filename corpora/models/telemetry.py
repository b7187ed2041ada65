"""The runs' telemetry: per-stage latency bins and per-minute counts."""

from __future__ import annotations

from django.db import models

from corpora.models.runs import Run


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
