"""The ETA of open runs: what is left (TODO and leased tasks, from the trigger-kept counts) divided by the
recent rate, the results applied (corpora.models.TelemetryMinute) in the current minute and the
RECENT_MINUTES before it, no earlier than the run's start, per second since the start of that window.
Null while no result was applied in that window; 0 when nothing is left. A run with tasks left whose
service no live worker serves is `stalled`, whatever its rate says."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from conversion.choices import TaskStatus
from corpora.models import TaskCount, TelemetryMinute
from corpora.statuses import QUEUED_BUCKET
from services.queries import served_service_ids

RECENT_MINUTES = 10
RATE_WINDOW = (
    f"results applied in the current minute and the {RECENT_MINUTES} before it (not before the run's start),"
    " per second since the start of that window"
)


def pair_remaining(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """TODO and leased tasks of each pair, from the trigger-kept counts."""
    remaining = dict.fromkeys(pairs, 0)
    if not pairs:
        return remaining
    rows = TaskCount.objects.filter(
        corpus_id__in={c for c, _ in pairs},
        service_id__in={s for _, s in pairs},
        bucket__in=(TaskStatus.TODO, QUEUED_BUCKET),
    ).values_list("corpus_id", "service_id", "count")
    for corpus_id, service_id, count in rows:
        if (corpus_id, service_id) in remaining:
            remaining[corpus_id, service_id] += count
    return remaining


def _window_start(started_at: datetime, now: datetime) -> datetime:
    current_minute = now.replace(second=0, microsecond=0)
    return max(started_at, current_minute - timedelta(minutes=RECENT_MINUTES))


@dataclass(frozen=True)
class Eta:
    """An open run's ETA: the tasks left over the rate of its recent results (EtaSerializer)."""

    remaining: int
    rate_per_minute: float | None
    rate_since: datetime
    recent_completed: int
    eta_seconds: float | None
    finishes_at: datetime | None
    stalled: str | None


def run_etas(runs: list[dict[str, Any]], now: datetime | None = None) -> dict[int, Eta]:
    """The ETA of each open run (dicts with id, corpus_id, service_id, started_at), in two reads."""
    now = now or timezone.now()
    if not runs:
        return {}
    earliest = min(_window_start(run["started_at"], now) for run in runs).replace(second=0, microsecond=0)
    recent: dict[int, int] = defaultdict(int)
    minutes = TelemetryMinute.objects.filter(
        run_id__in=[run["id"] for run in runs], minute__gte=earliest, minute__lte=now
    ).values_list("run_id", "minute", "count")
    starts = {run["id"]: _window_start(run["started_at"], now).replace(second=0, microsecond=0) for run in runs}
    for run_id, minute, count in minutes:
        if minute >= starts[run_id]:
            recent[run_id] += count
    remaining = pair_remaining({(run["corpus_id"], run["service_id"]) for run in runs})
    served = served_service_ids(now)
    etas = {}
    for run in runs:
        since = _window_start(run["started_at"], now)
        seconds = (now - since).total_seconds()
        done = recent[run["id"]]
        rate = done / seconds if done and seconds > 0 else None
        left = remaining[run["corpus_id"], run["service_id"]]
        eta = 0.0 if left == 0 else (left / rate if rate else None)
        etas[run["id"]] = Eta(
            remaining=left,
            rate_per_minute=round(rate * 60, 3) if rate is not None else None,
            rate_since=since,
            recent_completed=done,
            eta_seconds=round(eta, 1) if eta is not None else None,
            finishes_at=now + timedelta(seconds=eta) if eta is not None else None,
            stalled="no live worker serves its service" if left and run["service_id"] not in served else None,
        )
    return etas
