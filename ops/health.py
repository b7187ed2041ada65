"""Detailed health (GET /api/health and the /health screen): one record per check, each ok, warning or
problem, with a remediation line for whatever is not ok. The overall status is the worst check's.
Reads only: a writability probe creates and removes one temporary file."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Q
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from config.live import get_config
from config.redis_client import redis_client
from conversion import warm
from conversion.choices import SandboxProc, TaskStatus
from conversion.sandbox import problem as sandbox_problem
from corpora.models import Task
from corpora.queries.corpora import services_stranded
from corpora.results import results_space
from dispatcher.metrics import results_held_read
from jobs.choices import ACTIVE_STATES, JobState
from jobs.models import Job
from ops.choices import HealthStatus
from services.models import DispatcherState, Worker
from services.queries import (
    WORKER_SEEN_MINUTES,
    conversion_sandbox,
    convert_engine_socket,
    convert_engine_status,
    in_flight_list,
)

RANK: dict[str, int] = {HealthStatus.OK: 0, HealthStatus.WARNING: 1, HealthStatus.PROBLEM: 2}

# The dispatcher writes its heartbeat once a second; a few missed rounds mean it is gone or hung.
DISPATCHER_STALE_SECONDS = 15
PORT_TIMEOUT_SECONDS = 0.5
REDIS_TIMEOUT_SECONDS = 1.0
# The warm engine answers its status from memory; one that takes longer is hung or not there.
CONVERT_ENGINE_TIMEOUT_SECONDS = 1.0
# Free space under this on a corpus root, the results directory or the export root is a warning.
LOW_FREE_BYTES = 1 << 30


@dataclass(frozen=True)
class Check:
    """One check's record: ok, warning or problem, what to do when it is not ok, and its figures."""

    name: str
    status: str
    summary: str
    remediation: str | None
    details: Mapping[str, object]


@dataclass(frozen=True)
class Health:
    """GET /api/health: the worst check's status and every check."""

    status: str
    checked_at: datetime
    checks: list[Check]


def _check(name: str, status: str, summary: str, remediation: str | None = None, /, **details: object) -> Check:
    """A check's record; the remediation is kept only when the check is not ok. Its first four parameters are
    positional only, so a check's figures (`details`) can never take their place."""
    return Check(name, status, summary, remediation if status != HealthStatus.OK else None, details)


def database_pool_check() -> Check:
    pool = getattr(connection, "pool", None)
    if pool is None:
        return _check("database_pool", HealthStatus.OK, "no pool: each request opens its own connection", pool=False)
    stats = pool.get_stats()
    size = stats.get("pool_size", 0)
    idle = stats.get("pool_available", 0)
    waiting = stats.get("requests_waiting", 0)
    details = {"pool": True, "in_use": max(size - idle, 0), "idle": idle, "waiting": waiting, "max": pool.max_size}
    if waiting:
        return _check(
            "database_pool",
            HealthStatus.WARNING,
            f"{waiting} request(s) waiting for a database connection",
            "Raise pool.max (PUT /api/config, then restart; or DB_POOL_MAX) and PostgreSQL max_connections to "
            "match, or look for long queries in pg_stat_activity.",
            **details,
        )
    return _check("database_pool", HealthStatus.OK, f"{details['in_use']} in use, {idle} idle", **details)


def postgresql_check() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = cursor.fetchone()[0]
    except Exception as exc:
        return _check(
            "postgresql",
            HealthStatus.PROBLEM,
            f"PostgreSQL does not answer: {type(exc).__name__}",
            "Start PostgreSQL or fix DATABASE_URL (host, port, database, credentials), then retry.",
            reachable=False,
            version=None,
        )
    return _check("postgresql", HealthStatus.OK, f"reachable, server {version}", reachable=True, version=version)


def redis_check() -> Check:
    client = redis_client(socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS)
    try:
        version = client.info("server").get("redis_version")
    except Exception as exc:
        return _check(
            "redis",
            HealthStatus.PROBLEM,
            f"Redis does not answer: {type(exc).__name__}",
            "Start Redis (`manage.py up` starts an embedded one when REDIS_URL is unset) or fix REDIS_URL; "
            "background jobs cannot start meanwhile.",
            reachable=False,
            version=None,
        )
    finally:
        client.close()
    return _check("redis", HealthStatus.OK, f"reachable, server {version}", reachable=True, version=version)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PORT_TIMEOUT_SECONDS):
            return True
    except OSError:
        return False


def dispatcher_check() -> Check:
    host = settings.DISPATCHER_HOST
    ports = {"ventilator": settings.DISPATCHER_VENTILATOR_PORT, "sink": settings.DISPATCHER_SINK_PORT}
    reachable = {name: _port_open(host, port) for name, port in ports.items()}
    state = DispatcherState.objects.order_by("-heartbeat_at").first()
    age = (timezone.now() - state.heartbeat_at).total_seconds() if state else None
    details = {
        "host": host,
        "ventilator_port": ports["ventilator"],
        "sink_port": ports["sink"],
        "ventilator_reachable": reachable["ventilator"],
        "sink_reachable": reachable["sink"],
        "pid": state.pid if state else None,
        "heartbeat_age_seconds": round(age, 1) if age is not None else None,
    }
    start = "Start the dispatcher (`manage.py up` runs it, or `manage.py dispatcher`)"
    if state is None or age is None:
        return _check("dispatcher", HealthStatus.PROBLEM, "no dispatcher has run", f"{start}.", **details)
    if age > DISPATCHER_STALE_SECONDS:
        return _check(
            "dispatcher",
            HealthStatus.PROBLEM,
            f"no heartbeat for {age:.0f} s (process {state.pid}): stopped or hung",
            f"{start}; if process {state.pid} still exists it is hung: stop it first. Its log says why it stopped.",
            **details,
        )
    closed = [f"{name} {host}:{ports[name]}" for name, ok in reachable.items() if not ok]
    if closed:
        return _check(
            "dispatcher",
            HealthStatus.PROBLEM,
            f"alive (process {state.pid}) but not reachable on {', '.join(closed)}",
            "Check DISPATCHER_HOST / DISPATCHER_VENTILATOR_PORT / DISPATCHER_SINK_PORT against DISPATCHER_BIND "
            "and any firewall between this host and the dispatcher.",
            **details,
        )
    return _check("dispatcher", HealthStatus.OK, f"alive (process {state.pid}), ports reachable", **details)


def workers_check() -> Check:
    since = timezone.now() - timedelta(minutes=WORKER_SEEN_MINUTES)
    seen = list(
        Worker.objects.filter(last_seen__gte=since).order_by("service__name").values_list("service__name", flat=True)
    )
    per_service: dict[str, int] = {}
    for name in seen:
        per_service[name] = per_service.get(name, 0) + 1
    details = {"minutes": WORKER_SEEN_MINUTES, "seen": len(seen), "per_service": per_service}
    if not seen:
        return _check(
            "workers",
            HealthStatus.WARNING,
            f"no worker seen in the last {WORKER_SEEN_MINUTES} minutes",
            "Start conversion workers pointed at the dispatcher's ventilator and sink ports "
            "(`manage.py up --workers N` starts local ones); without them no task converts.",
            **details,
        )
    return _check(
        "workers", HealthStatus.OK, f"{len(seen)} worker(s) seen in the last {WORKER_SEEN_MINUTES} minutes", **details
    )


def served_check() -> Check:
    """Every converting service with waiting tasks has a live worker (services.queries.worker_live_since)."""
    stranded = services_stranded()
    details = {"stranded": stranded}
    if stranded:
        names = ", ".join(f"{entry['service']} ({entry['waiting']} waiting)" for entry in stranded)
        first = stranded[0]["service"]
        return _check(
            "served",
            HealthStatus.PROBLEM,
            f"tasks wait and no live worker serves {names}",
            f"Start workers for them (`manage.py worker --service {first}`, or `--all-services`; `manage.py up "
            "--workers N` starts local ones) pointed at the dispatcher's ports; or deactivate the service on its "
            "corpora if nothing should convert it.",
            **details,
        )
    return _check("served", HealthStatus.OK, "every service with waiting tasks has a live worker", **details)


# The in-flight check lists this many conversions at most, the longest running first.
IN_FLIGHT_LISTED = 20


def in_flight_check() -> Check:
    """The conversions in flight now; a warning for those running past their service's 99th percentile."""
    flying = in_flight_list()
    past = [row for row in flying if row.past_p99]
    listed = [
        {"service": row.service, "corpus": row.corpus, "document": row.document, "worker": row.worker,
         "elapsed_seconds": row.elapsed_seconds, "timeout_share": row.timeout_share, "p99_ms": row.p99_ms,
         "past_p99": row.past_p99}
        for row in (past or flying)[:IN_FLIGHT_LISTED]
    ]  # fmt: skip
    details = {"in_flight": len(flying), "past_p99": len(past), "conversions": listed}
    if past:
        row = past[0]
        return _check(
            "in_flight",
            HealthStatus.WARNING,
            f"{len(past)} of {len(flying)} conversion(s) in flight run past their service's 99th percentile; the "
            f"longest: {row.document} of {row.corpus} on {row.worker}, {row.elapsed_seconds:.0f} s",
            "A conversion past its service's usual runtime may be stuck: its worker ends it at the timeout. Look at "
            "the document (the workers screen of its service lists it) and at the worker's machine.",
            **details,
        )
    return _check(
        "in_flight", HealthStatus.OK, f"{len(flying)} conversion(s) in flight, none past its service's p99", **details
    )


def _free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def corpus_roots_check() -> Check:
    roots = []
    unreadable = []
    low = []
    for root in settings.CORPUS_ROOTS:
        readable = root.is_dir() and os.access(root, os.R_OK | os.X_OK)
        if readable:
            try:
                next(os.scandir(root), None)
            except OSError:
                readable = False
        free = _free_bytes(root) if readable else None
        roots.append({"path": str(root), "readable": readable, "free_bytes": free})
        if not readable:
            unreadable.append(str(root))
        elif free is not None and free < LOW_FREE_BYTES:
            low.append(str(root))
    details = {"roots": roots}
    if unreadable:
        return _check(
            "corpus_roots",
            HealthStatus.PROBLEM,
            f"not a readable directory: {', '.join(unreadable)}",
            "Create the directory or mount the volume, and make it readable by the service user; or remove it "
            "from CORPUS_ROOTS.",
            **details,
        )
    if low:
        return _check(
            "corpus_roots",
            HealthStatus.WARNING,
            f"less than 1 GiB free under {', '.join(low)}",
            "Free space on that volume (delete old corpora or exports) or move the corpora to a larger one.",
            **details,
        )
    return _check("corpus_roots", HealthStatus.OK, f"{len(roots)} root(s) readable", **details)


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _writable(directory: Path) -> bool:
    if not directory.is_dir() or not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".health-"):
            return True
    except OSError:
        return False


def _directory_check(name: str, setting: str, path: Path) -> Check:
    exists = path.is_dir()
    probe = path if exists else _existing_ancestor(path)
    writable = _writable(probe)
    free = _free_bytes(probe) if probe.is_dir() else None
    details = {"path": str(path), "exists": exists, "writable": writable, "free_bytes": free}
    if not writable:
        where = "" if exists else f" (its nearest existing ancestor {probe} is not a writable directory)"
        return _check(
            name,
            HealthStatus.PROBLEM,
            f"{path} cannot be written{where}",
            f"Make {path} a directory writable by the service user (mkdir -p, chown), or point {setting} at one.",
            **details,
        )
    if free is not None and free < LOW_FREE_BYTES:
        return _check(
            name,
            HealthStatus.WARNING,
            f"less than 1 GiB free under {path}",
            "Free space on that volume or move it.",
            **details,
        )
    if not exists:
        return _check(name, HealthStatus.OK, f"{path} will be created on first use", **details)
    return _check(name, HealthStatus.OK, f"{path} writable", **details)


def results_dir_check() -> Check:
    """The directory check, and the disk: below RESULTS_MIN_FREE_MB free, or while the sink says it holds
    results back (a write failed for want of space), a problem; below twice that, a warning."""
    check = _directory_check("results_dir", "RESULTS_DIR", settings.RESULTS_DIR)
    if check.status == HealthStatus.PROBLEM:
        return check
    space = results_space()
    try:
        held = results_held_read()
    except redis.RedisError:  # the redis check says so
        held = None
    since = None if held is None else datetime.fromtimestamp(held["since"], UTC).isoformat()
    details = {**check.details, "min_free_bytes": space.min_free_bytes, "held_since": since}
    if space.short or held is not None:
        why = held["reason"] if held is not None and not space.short else f"results disk full: {space.describe()}"
        sink = "the sink has stopped taking results" if held is not None else "the sink takes no result meanwhile"
        return _check(
            "results_dir",
            HealthStatus.PROBLEM,
            f"{why}; {sink} (workers keep theirs and no work is handed out)",
            f"Free space under {space.directory} or grow its volume; or lower RESULTS_MIN_FREE_MB (PUT /api/config "
            "results.min_free_mb). The sink takes results again within a second of there being room, and the "
            "workers send theirs.",
            **details,
        )
    if space.free_bytes is not None and space.free_bytes < 2 * space.min_free_bytes:
        return _check(
            "results_dir",
            HealthStatus.WARNING,
            f"{space.describe()}: the sink stops taking results below it",
            f"Free space under {space.directory} or grow its volume before it runs full.",
            **details,
        )
    return replace(check, details=details)


def export_root_check() -> Check:
    return _directory_check("export_root", "EXPORT_ROOT", settings.EXPORT_ROOT)


def jobs_check() -> Check:
    stall_before = timezone.now() - timedelta(seconds=get_config().JOB_STALL_SECONDS)
    active = Job.objects.filter(state__in=ACTIVE_STATES)
    counts = active.aggregate(
        queued=Count("pk", filter=Q(state=JobState.QUEUED)),
        running=Count("pk", filter=Q(state=JobState.RUNNING)),
    )
    stalled = list(
        active.annotate(last_sign=Coalesce(F("heartbeat_at"), F("created_at")))
        .filter(last_sign__lt=stall_before)
        .values_list("kind", flat=True)[:1000]
    )
    details = {**counts, "stalled": len(stalled), "stall_seconds": get_config().JOB_STALL_SECONDS}
    if stalled:
        return _check(
            "jobs",
            HealthStatus.PROBLEM,
            f"{len(stalled)} job(s) without a sign of life for over {get_config().JOB_STALL_SECONDS} s "
            f"({', '.join(sorted(set(stalled)))})",
            "Start the job worker (`manage.py up` runs it) and check Redis; a job whose worker died is marked "
            "interrupted by the next worker start and can be requested again.",
            **details,
        )
    return _check("jobs", HealthStatus.OK, f"{counts['queued']} queued, {counts['running']} running", **details)


def expired_leases_check() -> Check:
    # Matches the partial index task_leased_until (status > TODO): an index range scan, not a table scan.
    expired = Task.objects.filter(status__gt=TaskStatus.TODO, leased_until__lt=Now()).count()
    details = {"expired": expired, "reap_seconds": get_config().DISPATCHER_REAP_SECONDS}
    if expired:
        return _check(
            "expired_leases",
            HealthStatus.WARNING,
            f"{expired} task(s) whose lease has expired wait to be handed out again",
            f"The dispatcher returns them every {get_config().DISPATCHER_REAP_SECONDS} s; if the count does not fall, "
            "start the dispatcher.",
            **details,
        )
    return _check("expired_leases", HealthStatus.OK, "no expired lease waiting", **details)


def conversion_sandbox_check() -> Check:
    """Whether conversions can run, and run confined: bwrap usable is ok; turned off is a warning (documents
    run their Perl unconfined); bwrap unusable is a problem (workers refuse to start, /convert answers 503)."""
    sandbox = conversion_sandbox()
    if not sandbox.enabled:
        return _check(
            "conversion_sandbox",
            HealthStatus.WARNING,
            "the sandbox is turned off (CONVERSION_SANDBOX=none): documents run their own Perl unconfined",
            "Unset CONVERSION_SANDBOX (or set it to bwrap) with bubblewrap installed, then restart.",
            mode=sandbox.mode,
            state="none",
        )
    why = sandbox_problem(sandbox)
    if why is not None:
        return _check(
            "conversion_sandbox",
            HealthStatus.PROBLEM,
            f"conversions cannot run: {why}",
            "Install bubblewrap (apt-get install bubblewrap) or point CONVERSION_BWRAP at it; in a container, allow "
            "user namespaces (deploy/docker/seccomp-bwrap.json) and set CONVERSION_SANDBOX_PROC=none. Then restart "
            "the workers.",
            mode=sandbox.mode,
            state="unavailable",
        )
    return _check(
        "conversion_sandbox",
        HealthStatus.OK,
        f"conversions run confined in {sandbox.mode}" + (", without /proc" if sandbox.proc == SandboxProc.NONE else ""),
        mode=sandbox.mode,
        proc=sandbox.proc,
        state="ok",
    )


# What the convert_engine check shows of each pool (conversion.warm.WarmPool.status), in this order.
WARM_POOL_FIELDS = ("profile", "servers", "ready", "busy", "starting", "served", "failed", "restarts", "p50_ms",
                    "p95_ms", "last_error")  # fmt: skip


def _pool_trouble(pool: Mapping[str, Any]) -> str | None:
    """What is wrong with a warm pool in words, or None when all its servers are ready. Its last error is told
    with a shortage: a server started again after a conversion that left a process behind is ready again,
    and a pool whose servers are all ready serves."""
    troubles = []
    if pool["ready"] < pool["servers"]:
        troubles.append(f"{pool['ready']} of {pool['servers']} server(s) ready")
    if pool["starting"]:
        troubles.append(f"{pool['starting']} starting")
    if troubles and pool["last_error"]:
        troubles.append(f"last error: {pool['last_error']}")
    return f"{pool['profile']}: {', '.join(troubles)}" if troubles else None


def convert_engine_check() -> Check:
    """The warm engine of POST /convert (`manage.py convert_engine`) and each of its pools: ok when every server
    of every pool is ready; a warning when a pool is short of servers, starting or has failed, or when the
    engine does not answer (/convert then runs a cold latexmlc, slower); ok when CONVERT_WARM is off."""
    if not settings.CONVERT_WARM:
        return _check(
            "convert_engine",
            HealthStatus.OK,
            "the warm engine is off (CONVERT_WARM=false): /convert runs a cold latexmlc per request",
            warm=False,
            answering=None,
            pools=[],
        )
    socket_path = convert_engine_socket()
    pools = convert_engine_status(timeout=CONVERT_ENGINE_TIMEOUT_SECONDS)
    if pools is None:
        return _check(
            "convert_engine",
            HealthStatus.WARNING,
            f"the warm engine does not answer on {socket_path}: /convert runs a cold latexmlc, slower",
            "Start it: `manage.py up` runs it while CONVERT_WARM is on, or run `manage.py convert_engine` with the "
            "web's VAR_DIR. If it stops again, its log says why (`ccs logs --process convert-engine`).",
            warm=True,
            answering=False,
            pools=[],
        )
    shown = [{field: pool.get(field) for field in WARM_POOL_FIELDS} for pool in pools]
    details = {"warm": True, "answering": True, "pools": shown}
    troubles = [trouble for trouble in map(_pool_trouble, shown) if trouble]
    if troubles:
        return _check(
            "convert_engine",
            HealthStatus.WARNING,
            f"warm pool(s) not fully ready: {'; '.join(troubles)}",
            f"The engine starts a failed server again (after {warm.RESTART_PAUSE_SECONDS:g} s, then twice as long "
            f"each time, up to {warm.RESTART_PAUSE_MAX_SECONDS:g} s); meanwhile /convert runs a cold latexmlc for a "
            "profile without a free server. If a server keeps failing, the engine's log says why (`ccs logs "
            "--process convert-engine`); see also the conversion_sandbox check.",
            **details,
        )
    if not pools:
        return _check(
            "convert_engine",
            HealthStatus.OK,
            "the warm engine answers; no pool runs yet (a profile's pool starts at its first request)",
            **details,
        )
    ready = ", ".join(f"{pool['profile']} {pool['ready']}/{pool['servers']}" for pool in pools)
    return _check("convert_engine", HealthStatus.OK, f"every warm server ready: {ready}", **details)


CHECKS: tuple[Callable[[], Check], ...] = (
    database_pool_check,
    postgresql_check,
    redis_check,
    dispatcher_check,
    workers_check,
    served_check,
    in_flight_check,
    corpus_roots_check,
    results_dir_check,
    export_root_check,
    jobs_check,
    expired_leases_check,
    conversion_sandbox_check,
    convert_engine_check,
)
CHECK_NAMES = [
    "database_pool",
    "postgresql",
    "redis",
    "dispatcher",
    "workers",
    "served",
    "in_flight",
    "corpus_roots",
    "results_dir",
    "export_root",
    "jobs",
    "expired_leases",
    "conversion_sandbox",
    "convert_engine",
]


def _guarded(check: Callable[[], Check], name: str) -> Check:
    """A check that raises (the database gone mid-way) is itself a problem, not a 500."""
    try:
        return check()
    except Exception as exc:
        return _check(
            name,
            HealthStatus.PROBLEM,
            f"the check failed: {type(exc).__name__}: {str(exc)[:200]}",
            "See the postgresql check and the server log.",
        )


def health() -> Health:
    checks = [_guarded(check, name) for check, name in zip(CHECKS, CHECK_NAMES, strict=True)]
    overall = max((c.status for c in checks), key=RANK.__getitem__)
    return Health(status=overall, checked_at=timezone.now(), checks=checks)
