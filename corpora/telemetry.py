"""A run's telemetry: how long its tasks spent in each stage, kept as counts per log-scale bin, and how many
results were applied in each minute (docs/decisions/cost-and-schedule.md).

Stages, from the times the dispatcher already sees:
- queue wait: from when the task became TODO (`Task.todo_since`, else its run's start) until it was leased;
- conversion: from the lease until its result arrived at the sink;
- ingestion: from the arrival until the result was applied (when the applying transaction records it);
- end to end: from TODO until applied, the three above of the attempt whose result was applied.

The counts go to `TelemetryBin` and `TelemetryMinute` (corpora.models), written here in
the statement that leases a batch (`corpora.task_changes.lease_batch`) and in the transaction that applies
one (`results_record`, from the times `corpora.task_changes.results_lock` reads): a row per (run, stage,
bin) and per (run, minute) of a batch, never a row per task. A bin holds the durations in
[2^(b/4), 2^((b+1)/4)) milliseconds (bin 0 from 0), so a percentile read from the bins is known to within
a factor 2^(1/8), ±9%.
"""

# ruff: noqa: S608  (the statements are fixed text and this module's constants; values are parameters)
from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.backends.utils import CursorWrapper

from corpora.choices import Stage
from corpora.tables import RUN_TABLE, TELEMETRY_BIN_TABLE, TELEMETRY_MINUTE_TABLE

BINS_PER_OCTAVE = 4


def duration_bin(ms: float) -> int:
    """The bin of a duration in milliseconds, as the SQL below computes it."""
    return math.floor(math.log(max(ms, 1.0)) * (BINS_PER_OCTAVE / math.log(2)))


def bin_bounds(bin_: int) -> tuple[float, float]:
    """[from, to) milliseconds of a bin."""
    low = 0.0 if bin_ == 0 else 2 ** (bin_ / BINS_PER_OCTAVE)
    return low, 2 ** ((bin_ + 1) / BINS_PER_OCTAVE)


def bin_middle(bin_: int) -> float:
    """The value a bin stands for: its geometric middle, within 2^(1/8) of every duration in it (>= 1 ms)."""
    return 2 ** ((bin_ + 0.5) / BINS_PER_OCTAVE)


def _bin_sql(ms: str) -> str:
    return f"floor(ln(greatest({ms}, 1.0)) * {BINS_PER_OCTAVE / math.log(2)!r})::integer"


def _ms_sql(later: str, earlier: str) -> str:
    """Milliseconds from `earlier` to `later` (date_part: float8, where extract computes in numeric)."""
    return f"date_part('epoch', {later} - {earlier}) * 1000"


_UPSERT_BINS = f"ON CONFLICT (run_id, stage, bin) DO UPDATE SET count = {TELEMETRY_BIN_TABLE}.count + EXCLUDED.count"

# A data-modifying CTE of the lease statement (corpora.task_changes.lease_batch) over its CTE `leased`
# (the tasks leased, with `todo_since` as it was before the lease): their queue waits, per open run.
LEASE_WAITS_CTE = f"""
    waits AS (
        INSERT INTO {TELEMETRY_BIN_TABLE} (run_id, stage, bin, count)
        SELECT r.id, {Stage.QUEUE_WAIT}, {_bin_sql(_ms_sql("now()", "coalesce(l.todo_since, r.started_at)"))}, count(*)
          FROM leased l
          JOIN {RUN_TABLE} r ON r.corpus_id = l.corpus_id AND r.service_id = l.service_id AND r.finished_at IS NULL
         GROUP BY 1, 3 ORDER BY 1, 3
        {_UPSERT_BINS}
    )"""

# What one applied result brings: (its pair's open run, leased at, waiting since: TODO since or the run's
# start, arrival), times as Unix seconds; an unknown arrival leaves conversion and ingestion uncounted.
AppliedTimes = tuple[int, float | None, float | None, float | None]

# What one applied result cost: (its pair's open run, CPU ms, peak resident KiB), each None when unmeasured.
AppliedCost = tuple[int, int | None, int | None]

_UPSERT_APPLIED = f"""
WITH minutes AS (
    INSERT INTO {TELEMETRY_MINUTE_TABLE} (run_id, minute, count, cpu_ms, cpu_results)
    SELECT * FROM unnest(%s::bigint[], %s::timestamptz[], %s::bigint[], %s::bigint[], %s::bigint[])
    ON CONFLICT (run_id, minute) DO UPDATE SET count = {TELEMETRY_MINUTE_TABLE}.count + EXCLUDED.count,
        cpu_ms = {TELEMETRY_MINUTE_TABLE}.cpu_ms + EXCLUDED.cpu_ms,
        cpu_results = {TELEMETRY_MINUTE_TABLE}.cpu_results + EXCLUDED.cpu_results
)
INSERT INTO {TELEMETRY_BIN_TABLE} (run_id, stage, bin, count)
SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::smallint[], %s::bigint[])
{_UPSERT_BINS}
"""


def results_record(
    cursor: CursorWrapper,
    rows: Sequence[AppliedTimes],
    *,
    costs: Sequence[AppliedCost] = (),
    applied: float | None = None,
) -> None:
    """Count the conversion, ingestion and end-to-end times of results being applied (at `applied`, Unix
    seconds, now by default), and the results in that minute, into their runs, in the applying
    transaction; with their `costs`, the minute's CPU time and the peak memory's bins too. The bins are
    counted here and written in one statement, a row per distinct (run, stage, bin), in key order (the
    lock order between concurrent writers)."""
    if not rows:
        return
    applied = time.time() if applied is None else applied
    bins: Counter[tuple[int, int, int]] = Counter()
    applied_per_run: Counter[int] = Counter()
    for run_id, leased_at, waiting_since, arrived in rows:
        applied_per_run[run_id] += 1
        if waiting_since is not None:
            bins[run_id, Stage.END_TO_END, duration_bin(1000 * (applied - waiting_since))] += 1
        if arrived is not None:
            bins[run_id, Stage.INGESTION, duration_bin(1000 * (applied - arrived))] += 1
            if leased_at is not None:
                bins[run_id, Stage.CONVERSION, duration_bin(1000 * (arrived - leased_at))] += 1
    cpu_ms: Counter[int] = Counter()
    cpu_results: Counter[int] = Counter()
    for run_id, cpu, peak_kb in costs:
        if cpu is not None:
            cpu_ms[run_id] += cpu
            cpu_results[run_id] += 1
        if peak_kb is not None:
            bins[run_id, Stage.PEAK_MEMORY, duration_bin(peak_kb)] += 1
    minute = datetime.fromtimestamp(applied - applied % 60, UTC)
    run_ids = sorted(applied_per_run)
    keys = sorted(bins)
    cursor.execute(
        _UPSERT_APPLIED,
        [
            run_ids, [minute] * len(run_ids), [applied_per_run[r] for r in run_ids],
            [cpu_ms[r] for r in run_ids], [cpu_results[r] for r in run_ids],
            [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys], [bins[k] for k in keys],
        ],
    )  # fmt: skip


def telemetry_trim(cursor: CursorWrapper, *, corpus_id: int, service_id: int) -> None:
    """Keep the telemetry of the pair's open run and of its latest closed one only."""
    older = (
        f"SELECT id FROM {RUN_TABLE} WHERE corpus_id = %s AND service_id = %s AND finished_at IS NOT NULL"
        f" AND id <> (SELECT id FROM {RUN_TABLE} WHERE corpus_id = %s AND service_id = %s"
        "  AND finished_at IS NOT NULL ORDER BY finished_at DESC, id DESC LIMIT 1)"
    )
    for table in (TELEMETRY_BIN_TABLE, TELEMETRY_MINUTE_TABLE):
        cursor.execute(f"DELETE FROM {table} WHERE run_id IN ({older})", [corpus_id, service_id] * 2)


def telemetry_delete(cursor: CursorWrapper, runs: str, params: list[Any]) -> None:
    """Delete the telemetry of the runs that the subquery `runs` (fixed text, values in `params`) selects."""
    for table in (TELEMETRY_BIN_TABLE, TELEMETRY_MINUTE_TABLE):
        cursor.execute(f"DELETE FROM {table} WHERE run_id IN ({runs})", params)
