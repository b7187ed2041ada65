"""Reads about the running system."""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis
from django.db import connection
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from config.errors import ServiceError
from config.redis_client import redis_client
from conversion.choices import COMPLETED, COMPLETED_NAMES, TaskStatus
from corpora.models import Corpus, Run, TaskCount
from corpora.queries.corpora import corpus_get
from corpora.queries.history import CurrentRun, RunRecord, open_runs, run_history
from corpora.statuses import QUEUED_BUCKET
from jobs.models import Job
from jobs.queries import jobs_in_trouble
from ops.choices import HealthStatus, Readiness
from ops.health import health
from services.choices import ProtectedService
from services.models import Service, Worker
from services.queries import in_flight_list, service_get
from services.records import InFlightRecord

CORPUS_TABLE = Corpus._meta.db_table
RUN_TABLE = Run._meta.db_table
SERVICE_TABLE = Service._meta.db_table

logger = logging.getLogger(__name__)


def database_reachable() -> bool:
    """True when the database answers a trivial query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            answer: tuple[int] | None = cursor.fetchone()
            return answer == (1,)
    except Exception as exc:
        logger.warning("database not reachable: %s", exc)
        return False


@dataclass(frozen=True)
class DatabaseReach:
    reachable: bool


@dataclass(frozen=True)
class Liveness:
    """GET /healthz (LivenessSerializer)."""

    status: str
    database: DatabaseReach


def liveness() -> Liveness:
    """GET /healthz, the specification's liveness record: the status and whether the database answers."""
    reachable = database_reachable()
    return Liveness(Readiness.OK if reachable else Readiness.UNAVAILABLE, DatabaseReach(reachable))


# --- status and statistics ---

# A worker counts as active while it asked for work within this window.
ACTIVE_WORKER_SECONDS = 300
# The statistics' trend shows this many of each pair's latest closed runs.
TREND_RUNS = 20


@dataclass(frozen=True)
class Fleet:
    """The active workers of a service (FleetSerializer)."""

    service: str
    workers: int
    last_seen: datetime


@dataclass(frozen=True)
class Backlog:
    """Pending conversions: TODO and queued (BacklogSerializer)."""

    todo: int
    queued: int
    total: int


@dataclass(frozen=True)
class ServiceBacklog(Backlog):
    service: str


@dataclass(frozen=True)
class Status:
    """GET /api/status (StatusSerializer)."""

    corpora: int
    workers: list[Fleet]
    active_worker_seconds: int
    backlog: Backlog
    latest_run: RunRecord | None


def system_status() -> Status:
    """GET /api/status and the home screen: corpora, the active worker fleet per service, the pending
    conversion backlog (TODO and queued, from the trigger-kept counts) and the latest run."""
    since = timezone.now() - timedelta(seconds=ACTIVE_WORKER_SECONDS)
    fleet = (
        Worker.objects.filter(last_seen__gte=since)
        .values("service__name")
        .annotate(workers=Count("id"), last_seen=Max("last_seen"))
        .order_by("service__name")
    )
    pending = dict(
        TaskCount.objects.filter(bucket__in=(TaskStatus.TODO, QUEUED_BUCKET))
        .exclude(service__name__in=ProtectedService.values)
        .values("bucket")
        .annotate(n=Sum("count"))
        .values_list("bucket", "n")
    )
    todo, queued = pending.get(TaskStatus.TODO, 0), pending.get(QUEUED_BUCKET, 0)
    latest = run_history(limit=1)
    return Status(
        corpora=Corpus.objects.count(),
        workers=[Fleet(row["service__name"], row["workers"], row["last_seen"]) for row in fleet],
        active_worker_seconds=ACTIVE_WORKER_SECONDS,
        backlog=Backlog(todo=todo, queued=queued, total=todo + queued),
        latest_run=latest[0] if latest else None,
    )


# The dashboard lists this many conversions in flight, the longest running first.
DASHBOARD_IN_FLIGHT = 10
# The dashboard lists the jobs that failed within this window.
FAILED_JOBS_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class HealthProblem:
    name: str
    status: str


@dataclass(frozen=True)
class HealthSummary:
    """The worst check's status and the checks that are not ok (DashboardHealthSerializer)."""

    status: str
    problems: list[HealthProblem]


@dataclass(frozen=True)
class Dashboard(Status):
    """GET /api/dashboard: the status record and more (DashboardSerializer)."""

    open_runs: list[CurrentRun]
    backlog_per_service: list[ServiceBacklog]
    jobs: list[Job]
    failed_jobs_hours: int
    health: HealthSummary
    in_flight: int
    in_flight_past_p99: int
    in_flight_longest: list[InFlightRecord]


def dashboard() -> Dashboard:
    """GET /api/dashboard and the home screen: the status record, every open run with its progress, rate
    and ETA, the backlog per service, the jobs that stalled or failed lately and the health checks that
    are not ok (name and status; the details are on the signed-in health screen and GET /api/health)."""
    backlog = (
        TaskCount.objects.filter(bucket__in=(TaskStatus.TODO, QUEUED_BUCKET))
        .exclude(service__name__in=ProtectedService.values)
        .values("service__name")
        .annotate(
            todo=Sum("count", filter=Q(bucket=TaskStatus.TODO), default=0),
            queued=Sum("count", filter=Q(bucket=QUEUED_BUCKET), default=0),
        )
        .order_by("service__name")
    )
    checks = health()
    flying = in_flight_list()
    status = system_status()
    return Dashboard(
        corpora=status.corpora,
        workers=status.workers,
        active_worker_seconds=status.active_worker_seconds,
        backlog=status.backlog,
        latest_run=status.latest_run,
        open_runs=open_runs(),
        backlog_per_service=[
            ServiceBacklog(service=row["service__name"], todo=row["todo"], queued=row["queued"],
                           total=row["todo"] + row["queued"])
            for row in backlog
            if row["todo"] + row["queued"]
        ],
        jobs=list(jobs_in_trouble(failed_within=FAILED_JOBS_WINDOW)),
        failed_jobs_hours=int(FAILED_JOBS_WINDOW.total_seconds() // 3600),
        health=HealthSummary(
            status=checks.status,
            problems=[HealthProblem(c.name, c.status) for c in checks.checks if c.status != HealthStatus.OK],
        ),
        in_flight=len(flying),
        in_flight_past_p99=sum(row.past_p99 for row in flying),
        in_flight_longest=flying[:DASHBOARD_IN_FLIGHT],
    )  # fmt: skip


# Tasks a closed run's frozen tallies count as completed (sums of its completed statuses' keys).
_COMPLETED_SQL = " + ".join(f"coalesce((tallies->>'{COMPLETED_NAMES[s]}')::bigint, 0)" for s in COMPLETED)


@dataclass(frozen=True)
class TrendPoint:
    """A closed run of a pair's trend (TrendPointSerializer)."""

    id: int
    started_at: datetime | None
    duration_seconds: float
    completed: int
    tallies: dict[str, int]


@dataclass(frozen=True)
class PairStatistics:
    """A (corpus, service) pair's closed runs in figures (PairStatisticsSerializer)."""

    corpus: str
    service: str
    runs: int
    mean_duration_seconds: float
    last_duration_seconds: float
    tasks_per_hour: float | None
    trend: list[TrendPoint]


def _trend_point(point: Mapping[str, Any]) -> TrendPoint:
    """A point of the trend as json_agg builds it (a JSON object, its time in text)."""
    return TrendPoint(
        id=point["id"],
        started_at=parse_datetime(point["started_at"]),
        duration_seconds=round(point["duration_seconds"], 3),
        completed=point["completed"],
        tallies=point["tallies"],
    )


def run_statistics(*, corpus: str | None = None, service: str | None = None) -> list[PairStatistics]:
    """GET /api/statistics: per (corpus, service), over its closed runs: their number, mean and last
    duration, throughput (completed tasks of the frozen tallies per hour of run) and the tallies of the
    latest TREND_RUNS runs, oldest first. One grouped read of corpora_run."""
    clauses, params = ["r.finished_at IS NOT NULL", "r.tallies IS NOT NULL"], []
    if corpus:
        clauses.append("r.corpus_id = %s")
        params.append(corpus_get(corpus).pk)
    if service:
        clauses.append("r.service_id = %s")
        params.append(service_get(service).pk)
    sql = (
        "WITH closed AS ("
        " SELECT r.id, r.corpus_id, r.service_id, r.started_at, r.tallies,"
        f"  extract(epoch FROM r.finished_at - r.started_at)::float8 AS secs, ({_COMPLETED_SQL}) AS done,"
        "  row_number() OVER (PARTITION BY r.corpus_id, r.service_id ORDER BY r.started_at DESC, r.id DESC) AS rn"
        f" FROM {RUN_TABLE} r WHERE {' AND '.join(clauses)})"
        " SELECT c.name, s.name, count(*), avg(k.secs), max(k.secs) FILTER (WHERE k.rn = 1),"
        "  (sum(k.done) FILTER (WHERE k.secs > 0))::float8, sum(k.secs) FILTER (WHERE k.secs > 0),"
        "  json_agg(json_build_object('id', k.id, 'started_at', k.started_at, 'duration_seconds', k.secs,"
        "   'completed', k.done, 'tallies', k.tallies) ORDER BY k.started_at, k.id) FILTER (WHERE k.rn <= %s)"
        f" FROM closed k JOIN {CORPUS_TABLE} c ON c.id = k.corpus_id JOIN {SERVICE_TABLE} s ON s.id = k.service_id"
        " GROUP BY c.name, s.name ORDER BY c.name, s.name"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, TREND_RUNS])
        rows = cursor.fetchall()
    return [
        PairStatistics(
            corpus=corpus_name,
            service=service_name,
            runs=runs,
            mean_duration_seconds=round(mean, 3),
            last_duration_seconds=round(last, 3),
            tasks_per_hour=round(done * 3600 / secs, 1) if secs else None,
            trend=[_trend_point(point) for point in trend],
        )
        for corpus_name, service_name, runs, mean, last, done, secs, trend in rows
    ]


# --- logs ---


@dataclass(frozen=True)
class LogRecord:
    """A kept log record (LogRecordSerializer), at the level it counts at."""

    id: str
    time: str
    level: str
    levelno: int
    logger: str
    process: str
    pid: int
    request_id: str
    message: str


@dataclass(frozen=True)
class LogPage:
    """GET /api/logs: records newest first, and the cursor of the next page (LogsSerializer)."""

    records: list[LogRecord]
    next_before: str | None


@dataclass(frozen=True)
class LogSources:
    """The processes and loggers the log screen's filters offer (LogSourcesSerializer)."""

    processes: list[str]
    loggers: list[str]


# A stream entry as redis-py types it: its id and fields (text, with decode_responses).
StreamEntry = tuple[bytes | str | None, Mapping[bytes | str, bytes | str] | None]


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else value or ""


def _entries(batch: Iterable[StreamEntry] | None) -> list[tuple[str, dict[str, str]]]:
    """A batch of stream entries as text: each id and its fields."""
    return [
        (_text(entry_id), {_text(k): _text(v) for k, v in (fields or {}).items()}) for entry_id, fields in batch or []
    ]


class LogsUnavailable(ServiceError):
    status = 503
    title = "Service unavailable"
    slug = "unavailable"


def _older_than(entry_id: str) -> str | None:
    """The newest stream id older than entry_id (an inclusive XREVRANGE bound), None below the first."""
    ms, seq = (int(part) for part in entry_id.split("-"))
    if seq > 0:
        return f"{ms}-{seq - 1}"
    return f"{ms - 1}-{2**64 - 1}" if ms > 0 else None


def log_records(
    *,
    level: str | None = None,
    process: str | None = None,
    logger: str | None = None,
    request_id: str | None = None,
    before: str | None = None,
    limit: int = 100,
) -> LogPage:
    """GET /api/logs and /logs: the kept log records of every process, newest first, filtered (minimum
    level, process, logger with its children, request id), `limit` per page; `next_before` is the cursor of
    the next page (None at the end). Reads the stream in batches from `before` (exclusive) until the page is
    full. Celery's routine lines count as DEBUG (config.logsink.stream_level), kept so or not."""

    from config.logsink import LOG_KEEP, STREAM

    client = redis_client(socket_timeout=2, socket_connect_timeout=2, decode_responses=True)
    wanted = {"process": process, "logger": logger, "request_id": request_id}
    try:
        return _log_page(client, STREAM, LOG_KEEP, level, wanted, before, limit)
    except redis.RedisError as exc:
        raise LogsUnavailable(f"The log store (Redis) does not answer: {exc}") from exc


def _log_record(entry_id: str, fields: Mapping[str, str]) -> LogRecord:
    """A stream entry as the API gives it, at the level it counts at."""
    from config.logsink import stream_level

    logger, message = fields.get("logger", ""), fields.get("message", "")
    levelno, level = stream_level(int(fields.get("levelno", 0)), fields.get("level", ""), logger, message)
    return LogRecord(
        id=entry_id,
        time=fields.get("time", ""),
        level=level,
        levelno=levelno,
        logger=logger,
        process=fields.get("process", ""),
        pid=int(fields.get("pid", 0)),
        request_id=fields.get("request_id", ""),
        message=message,
    )


def _log_matches(record: LogRecord, minimum: int, wanted: dict[str, str | None]) -> bool:
    if record.levelno < minimum:
        return False
    if wanted["process"] and record.process != wanted["process"]:
        return False
    name, parent = record.logger, wanted["logger"]
    if parent and name != parent and not name.startswith(parent + "."):
        return False
    return not (wanted["request_id"] and record.request_id != wanted["request_id"])


def _log_page(
    client: redis.Redis, stream: str, keep: int, level: str | None, wanted: dict[str, str | None],
    before: str | None, limit: int,
) -> LogPage:  # fmt: skip
    minimum: int = logging.getLevelName(level) if level else 0
    records: list[LogRecord] = []
    cursor, scanned = _older_than(before) if before else "+", 0
    last_seen: str | None = None
    while cursor is not None and len(records) < limit and scanned < keep * 2:
        batch = _entries(client.xrevrange(stream, max=cursor, min="-", count=max(limit, 500)))
        if not batch:
            last_seen = None
            break
        for entry_id, fields in batch:
            scanned += 1
            last_seen = entry_id
            record = _log_record(entry_id, fields)
            if not _log_matches(record, minimum, wanted):
                continue
            records.append(record)
            if len(records) == limit:
                break
        cursor = _older_than(last_seen) if last_seen else None
    older = _older_than(last_seen) if last_seen else None
    more = older is not None and bool(client.xrevrange(stream, max=older, min="-", count=1))
    return LogPage(records=records, next_before=last_seen if more else None)


# The log screen offers the processes and loggers of this many newest records as its source filters.
LOG_SOURCES_SCANNED = 2000


def log_sources() -> LogSources:
    """The processes and loggers present among the newest LOG_SOURCES_SCANNED records, each sorted: what the
    log screen's source filters offer."""
    from config.logsink import STREAM

    client = redis_client(socket_timeout=2, socket_connect_timeout=2, decode_responses=True)
    try:
        batch = _entries(client.xrevrange(STREAM, max="+", min="-", count=LOG_SOURCES_SCANNED))
    except redis.RedisError as exc:
        raise LogsUnavailable(f"The log store (Redis) does not answer: {exc}") from exc
    processes = {fields.get("process", "") for _, fields in batch} - {""}
    loggers = {fields.get("logger", "") for _, fields in batch} - {""}
    return LogSources(processes=sorted(processes), loggers=sorted(loggers))
