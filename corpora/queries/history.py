"""Reads of run history: every run, a pair's runs and its open run, as run records (an open run's
tallies live from the task counts, and its ETA); and the (corpus, service) pair that has a history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q

from config.errors import BadRequest, NotFound
from corpora.models import Run, TaskCount
from corpora.queries.corpora import Pair, status_counts
from corpora.queries.eta import Eta, run_etas


def history_limit(limit: int | None) -> int:
    """`limit` of a run history: default RUNS_PAGE_DEFAULT, at most RUNS_PAGE_MAX, 400 below 1."""
    if limit is None:
        return settings.RUNS_PAGE_DEFAULT
    if limit < 1:
        raise BadRequest("limit must be at least 1.", errors={"limit": ["at least 1"]})
    return min(limit, settings.RUNS_PAGE_MAX)


@dataclass(frozen=True)
class RunProfile:
    """How a run converted: its converter profile, its hash (every hash it had, when changed while it ran),
    its engine and the engine versions the workers reported (RunProfileSerializer)."""

    id: int
    started_at: datetime
    finished_at: datetime | None
    engine: str
    engine_versions: list[str]
    profile: dict[str, Any]
    profile_hash: str
    profile_hashes: list[str]
    profile_changed: bool


@dataclass(frozen=True)
class RunRecord(RunProfile):
    """A run of a pair: its profile (RunProfile) with its pair, owner and tallies, these live while it is open
    (RunSerializer)."""

    corpus: str
    service: str
    owner: str
    description: str
    duration_seconds: float | None
    open: bool
    tallies: dict[str, int] | None
    snapshot_at: datetime | None


@dataclass(frozen=True)
class CurrentRun(RunRecord):
    """An open run with its ETA (corpora.queries.eta; CurrentRunSerializer)."""

    eta: Eta | None


def _run_records(runs: list[dict[str, Any]]) -> list[RunRecord]:
    """Run DTOs; the open runs' live tallies come from one read of the counts of all their pairs."""
    open_pairs = {(r["corpus_id"], r["service_id"]) for r in runs if r["finished_at"] is None}
    rows: dict[tuple[int, int], list[tuple[int, int]]] = {pair: [] for pair in open_pairs}
    if open_pairs:
        counts = TaskCount.objects.filter(
            corpus_id__in={c for c, _ in open_pairs}, service_id__in={s for _, s in open_pairs}
        ).values_list("corpus_id", "service_id", "bucket", "count")
        for corpus_id, service_id, bucket, count in counts:
            if (corpus_id, service_id) in rows:
                rows[corpus_id, service_id].append((bucket, count))
    live = {pair: status_counts(pair_rows) for pair, pair_rows in rows.items()}
    return [_run_record(run, live.get((run["corpus_id"], run["service_id"]))) for run in runs]


def _run_record(run: dict[str, Any], live_tallies: dict[str, Any] | None = None) -> RunRecord:
    end = run["finished_at"]
    return RunRecord(
        id=run["id"],
        corpus=run["corpus__name"],
        service=run["service__name"],
        owner=run["owner"],
        description=run["description"],
        started_at=run["started_at"],
        finished_at=end,
        duration_seconds=round((end - run["started_at"]).total_seconds(), 3) if end else None,
        open=end is None,
        tallies=run["tallies"] if end is not None else live_tallies,
        snapshot_at=run["snapshot__taken_at"],
        **_profile_fields(run),
    )


def _profile_fields(run: dict[str, Any]) -> dict[str, Any]:
    """The profile columns of a run row, as RunProfile and RunRecord take them."""
    return {
        "engine": run["engine"],
        "engine_versions": run["engine_versions"],
        "profile": run["profile"],
        "profile_hash": run["profile_hash"],
        "profile_hashes": run["profile_hashes"],
        "profile_changed": len(run["profile_hashes"]) > 1,
    }


_PROFILE_FIELDS = ("id", "started_at", "finished_at", "engine", "engine_versions", "profile", "profile_hash",
                   "profile_hashes")  # fmt: skip


def run_profile(run: dict[str, Any] | None) -> RunProfile | None:
    """A run (its _PROFILE_FIELDS) as RunProfileSerializer takes it, or None."""
    if run is None:
        return None
    times = {key: run[key] for key in ("id", "started_at", "finished_at")}
    return RunProfile(**times, **_profile_fields(run))


def run_at(corpus_id: int, service_id: int, moment: datetime) -> RunProfile | None:
    """The run of a pair open at `moment` (a run's close takes its snapshot at its end), as run_profile."""
    run = (
        Run.objects.filter(corpus_id=corpus_id, service_id=service_id, started_at__lte=moment)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=moment))
        .order_by("-started_at", "-id")
        .values(*_PROFILE_FIELDS)
        .first()
    )
    return run_profile(run)


def run_latest(corpus_id: int, service_id: int) -> RunProfile | None:
    """The pair's latest run, open or closed, as run_profile."""
    run = (
        Run.objects.filter(corpus_id=corpus_id, service_id=service_id)
        .order_by("-started_at", "-id")
        .values(*_PROFILE_FIELDS)
        .first()
    )
    return run_profile(run)


# A history page reads its runs as plain rows: model instances of each run, corpus, service and snapshot
# made a large page markedly slower (bench/README.md, "Runs").
_RUN_FIELDS = (
    "id", "corpus_id", "service_id", "corpus__name", "service__name", "owner", "description", "started_at",
    "finished_at", "tallies", "snapshot__taken_at", *_PROFILE_FIELDS[3:],
)  # fmt: skip


def _runs() -> Any:
    return Run.objects.values(*_RUN_FIELDS)


def run_history(
    *, corpus: str | None = None, service: str | None = None, owner: str | None = None, limit: int | None = None
) -> list[RunRecord]:
    """GET /api/runs: every run, newest first, optionally of one corpus, service or owner."""
    runs = _runs()
    if corpus:
        runs = runs.filter(corpus__name=corpus)
    if service:
        runs = runs.filter(service__name=service)
    if owner:
        runs = runs.filter(owner=owner)
    return _run_records(list(runs.order_by("-started_at", "-id")[: history_limit(limit)]))


def pair_known(pair: Pair) -> Pair:
    """The pair, when the service ever ran on the corpus (an activation, a run or a snapshot: Pair.known);
    404 for anything else."""
    if not pair.known:
        raise NotFound(f"The service {pair.service_name!r} has never run on the corpus {pair.corpus_name!r}.")
    return pair


def pair_runs(pair: Pair, *, limit: int | None = None) -> list[RunRecord]:
    """GET /api/runs/{corpus}/{service}: the pair's runs, most recent first."""
    pair_known(pair)
    runs = _runs().filter(corpus_id=pair.corpus_id, service_id=pair.service_id).order_by("-started_at", "-id")
    return _run_records(list(runs[: history_limit(limit)]))


def run_current(pair: Pair) -> CurrentRun | None:
    """GET /api/runs/{corpus}/{service}/current: the open run with live tallies and its ETA
    (corpora.queries.eta), or None."""
    pair_known(pair)
    run = _runs().filter(corpus_id=pair.corpus_id, service_id=pair.service_id, finished_at__isnull=True).first()
    if run is None:
        return None
    return CurrentRun(**vars(_run_records([run])[0]), eta=run_etas([run])[run["id"]])


def open_runs() -> list[CurrentRun]:
    """Every open run, oldest first, with its live tallies and ETA (the dashboard's runs)."""
    runs = list(_runs().filter(finished_at__isnull=True).order_by("started_at", "id"))
    etas = run_etas(runs)
    return [CurrentRun(**vars(record), eta=etas[record.id]) for record in _run_records(runs)]
