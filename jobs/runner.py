"""The one runner every background job goes through: claim, run, report progress, finish.

A kind's function receives a JobContext and its params. It raises JobFailed (or a ServiceError)
for an expected failure; anything else is an internal error, logged with its traceback, while
the job row shows a one-line message. A transient database error (config/transient.py) runs a kind
registered with `rerun` again, with backoff, and the retries show in the job's log; one that outlasts
them ends the job with a message that says what to do. Kinds of one lane run one at a time.
"""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psutil
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.errors import ServiceError
from config.logs import request_id_var
from config.transient import connection_lost, transient_gave_up, transient_note, transient_reason, transient_retry
from jobs.choices import JobState
from jobs.models import Job
from jobs.registry import JobKind, job_kind_get, lane_kinds

JOB_TABLE = Job._meta.db_table

logger = logging.getLogger(__name__)

LOG_LINES_KEPT = 200
# A connection of its own, so progress shows while the job's work sits in an open transaction.
PROGRESS_DB = "progress"
_PROGRESS_INTERVAL = 0.5  # seconds between progress writes, so tight loops do not hammer the row
_LANE_POLL_SECONDS = 0.5  # how often a job waiting for its lane asks again (and beats its heart)
# The runner's own writes (claim, finish) keep trying while PostgreSQL restarts, for this long.
_OWN_WRITES_LOST_FOR_SECONDS = 60.0

T = TypeVar("T")


class JobFailed(Exception):
    """An expected failure: the job ends `failed` with this message."""


def worker_identity() -> str:
    """host:pid:start-time of this process; the start time guards against pid reuse."""
    pid = os.getpid()
    started = int(psutil.Process(pid).create_time())
    return f"{socket.gethostname()}:{pid}:{started}"


class JobContext:
    """What a running job may do to its own row: report progress and append log lines."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._last_write = 0.0

    @property
    def uuid(self) -> uuid.UUID:
        return self.job.uuid

    def progress(self, current: int, total: int | None = None, message: str | None = None) -> None:
        """Record progress (and a heartbeat); writes are throttled except for the last step."""
        now = time.monotonic()
        final = total is not None and current >= total
        if not final and now - self._last_write < _PROGRESS_INTERVAL:
            return
        self._last_write = now
        fields: dict[str, Any] = {"progress_current": current, "heartbeat_at": timezone.now()}
        if total is not None:
            fields["progress_total"] = total
        if message is not None:
            fields["message"] = message[:500]
        try:
            Job.objects.using(PROGRESS_DB).filter(pk=self.job.pk).update(**fields)
        except DatabaseError as exc:
            if not self._progress_write_skipped(exc):
                raise
            # The next call writes again, whatever the throttle says.
            self._last_write = 0.0

    def log(self, line: str) -> None:
        """Append a line to the job's log (the newest LOG_LINES_KEPT are kept)."""
        stamped = f"{timezone.now():%H:%M:%S} {line}"[:1000]
        for attempt in (1, 2):  # once more on a new connection when the first was lost
            try:
                self._log_write(stamped)
                break
            except DatabaseError as exc:
                if not self._progress_write_skipped(exc):
                    raise
                if attempt == 2:
                    logger.warning("job %s: the log line could not be written: %s", self.job.pk, line)
        logger.info("job %s: %s", self.job.kind, line)

    def retry_noted(self, exc: BaseException, attempt: int, wait: float) -> None:
        """Show a retry of the job's work in its log (transient_retry's on_retry)."""
        self.log(transient_note(exc, attempt, wait))

    def _log_write(self, stamped: str) -> None:
        with connections[PROGRESS_DB].cursor() as cursor:
            cursor.execute(
                f"""
                UPDATE {JOB_TABLE}
                   SET log = (CASE WHEN jsonb_array_length(log) >= %s
                                   THEN log - 0 ELSE log END) || jsonb_build_array(%s::text),
                       heartbeat_at = now()
                 WHERE uuid = %s
                """,
                [LOG_LINES_KEPT, stamped, self.job.pk],
            )

    def _progress_write_skipped(self, exc: DatabaseError) -> bool:
        """Whether a progress or log write that failed may be skipped: a transient error, outside a
        transaction of the job's own. A lost connection is closed, so the next write opens a new one."""
        connection = connections[PROGRESS_DB]
        if transient_reason(exc) is None or connection.in_atomic_block:
            # A real error; or the write was part of the job's transaction (the tests share its
            # connection), which the error aborted: the job's work fails, and its retry decides.
            return False
        logger.warning("job %s: a progress write was skipped: %s", self.job.pk, transient_reason(exc))
        if connection_lost(exc):
            _connection_drop(connection)
        return True


def _connection_drop(connection: BaseDatabaseWrapper) -> None:
    """Close one connection that was lost, so that its next use opens a new one."""
    try:
        connection.close()
    except DatabaseError:
        connection.connection = None  # closing a dead socket can fail; drop it all the same


def _own_write(work: Callable[[], T], *, what: str) -> T:
    """One of the runner's own statements on the job row, tried again after a transient error (each is
    safe to repeat)."""
    return transient_retry(work, what=what, lost_for=_OWN_WRITES_LOST_FOR_SECONDS)


def job_run(job_id: str | uuid.UUID) -> str:
    """Run a queued job once; returns the final state. A job not in `queued` is left alone."""
    now, worker = timezone.now(), worker_identity()
    # A claim whose commit was lost with its connection is ours when tried again: same worker, same start.
    ours = Q(state=JobState.QUEUED) | Q(state=JobState.RUNNING, worker=worker, started_at=now)
    claimed = _own_write(
        lambda: Job.objects.filter(ours, pk=job_id).update(
            state=JobState.RUNNING, started_at=now, heartbeat_at=now, worker=worker
        ),
        what=f"claiming job {job_id}",
    )
    if not claimed:
        logger.info("job %s is not queued any more; nothing to run", job_id)
        return Job.objects.filter(pk=job_id).values_list("state", flat=True).first() or "missing"
    job = _own_write(lambda: Job.objects.get(pk=job_id), what=f"reading job {job_id}")
    token = request_id_var.set(f"job-{job.pk.hex[:12]}")
    try:
        return _run_claimed(job)
    finally:
        request_id_var.reset(token)


def _run_claimed(job: Job) -> str:
    kind = job_kind_get(job.kind)
    context = JobContext(job)
    state, message, result = JobState.SUCCEEDED, "", None
    if kind is None:
        state, message = JobState.FAILED, f"unknown job kind {job.kind!r}"
    else:
        try:
            result = _kind_run(kind, context, job.params)
        except (JobFailed, ServiceError) as exc:
            state, message = JobState.FAILED, str(exc)
        except Exception as exc:
            if transient_reason(exc) is not None:
                logger.warning("job %s %s failed: %s", job.kind, job.pk, exc, exc_info=True)
                state, message = JobState.FAILED, transient_gave_up(exc)
            else:
                logger.exception("job %s %s crashed", job.kind, job.pk)
                state, message = JobState.FAILED, f"internal error: {type(exc).__name__}: {exc}"
    finished = {"state": state, "finished_at": timezone.now(), "heartbeat_at": timezone.now()}
    if message:
        finished["message"] = message[:500]
    elif state == JobState.SUCCEEDED:
        finished["message"] = "done"
        # A job that counted its work ends at 100% even if its last progress write was throttled.
        finished["progress_current"] = Coalesce(F("progress_total"), F("progress_current"))
    _own_write(lambda: Job.objects.filter(pk=job.pk).update(result=result, **finished), what=f"finishing job {job.pk}")
    logger.info("job %s %s ended %s %s", job.kind, job.pk, state, message)
    return state


def _kind_run(kind: JobKind, context: JobContext, params: dict[str, Any]) -> dict[str, Any] | None:
    """The kind's function in its lane; again after a transient database error when the kind says that is
    safe (`rerun`): the attempt that stopped was rolled back, and the lane is taken anew."""

    def attempt() -> dict[str, Any] | None:
        with _lane_held(kind, context):
            return kind.function(context, **params)

    if not kind.rerun:
        return attempt()  # a kind not safe to rerun whole retries inside, at its transactions
    return transient_retry(attempt, what=f"job {kind.name} {context.uuid}", on_retry=context.retry_noted)


def _lane_key(lane: str) -> int:
    """The advisory lock key of a lane: 64 bits of a hash of its name, the same in every process."""
    return int.from_bytes(hashlib.blake2b(f"ccs job lane {lane}".encode(), digest_size=8).digest(), "big", signed=True)


@contextlib.contextmanager
def _lane_held(kind: JobKind, context: JobContext) -> Iterator[None]:
    """Hold the kind's lane (a session-level advisory lock on the job's connection) while it runs; wait,
    saying so in the job's log and beating its heart, while another job holds it."""
    if kind.lane is None:
        yield
        return
    key, connection = _lane_key(kind.lane), connections[DEFAULT_DB_ALIAS]
    waiting_since: float | None = None
    while True:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            if cursor.fetchone()[0]:
                break
        if waiting_since is None:
            waiting_since = time.monotonic()
            holders = _lane_holders(kind.lane, context.job)
            context.log(f"waiting for {holders} to finish (one {kind.lane} job at a time)")
        context.progress(0, None, f"waiting for the other {kind.lane} job to finish")
        time.sleep(_LANE_POLL_SECONDS)
    if waiting_since is not None:
        context.log(f"the other {kind.lane} job finished; starting after {time.monotonic() - waiting_since:.1f} s")
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        except DatabaseError as exc:
            if connection_lost(exc):
                _connection_drop(connection)  # the session is gone, and its lock with it
            else:  # an aborted transaction of a caller's (tests): the lock goes with the session
                logger.warning("job %s: the %s lane was not released: %s", context.uuid, kind.lane, exc)


def _lane_holders(lane: str, job: Job) -> str:
    """The running jobs of a lane other than `job`, for the log line of a job waiting for it."""
    running = Job.objects.filter(kind__in=lane_kinds(lane), state=JobState.RUNNING).exclude(pk=job.pk)
    names = [f"{kind} {pk.hex[:8]}" for kind, pk in running.values_list("kind", "uuid")]
    return ", ".join(names) or f"another {lane} job"
