"""Job kinds used only by the tests, to drive the shared runner through each of its paths."""

from __future__ import annotations

import time
from typing import Any

from jobs.registry import job_kind
from jobs.runner import JobContext, JobFailed


@job_kind("test_count")
def test_count(ctx: JobContext, *, steps: int = 3, delay: float = 0.0) -> dict[str, Any]:
    """Count to `steps`, reporting progress and a log line each step."""
    for step in range(1, steps + 1):
        time.sleep(delay)
        ctx.log(f"step {step}")
        ctx.progress(step, steps, f"step {step} of {steps}")
    return {"counted": steps}


@job_kind("test_fail")
def test_fail(ctx: JobContext, *, reason: str = "bad input") -> None:
    """Fail the way a job fails on bad input."""
    raise JobFailed(reason)


@job_kind("test_crash")
def test_crash(ctx: JobContext) -> None:
    """Crash the way a bug crashes."""
    raise ZeroDivisionError("secret internals")


@job_kind("test_debounced", debounced=True)
def test_debounced(ctx: JobContext) -> dict[str, Any]:
    """A kind of which only one may be active at a time."""
    return {}


@job_kind("test_sleep")
def test_sleep(ctx: JobContext, *, seconds: float = 60.0) -> dict[str, Any]:
    """Sleep, so that a test can kill the worker in the middle."""
    ctx.progress(0, 1, "sleeping")
    time.sleep(seconds)
    return {}


@job_kind("test_setting")
def test_setting(ctx: JobContext, *, name: str) -> dict[str, Any]:
    """Report a live key as the process running the job sees it through the accessor (configuration changes at
    run time), and its setting, which stays as the process started."""
    from django.conf import settings

    from config.live import get_config

    return {"value": getattr(get_config(), name), "setting": getattr(settings, name)}


def _session_waits_or_idles(cursor: Any, pid: int, timeout: float = 30.0) -> None:
    """Wait until the session `pid` waits for a lock or has no transaction open (the marker names the
    wait in pg_stat_activity, for the test on the other side)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # pg_stat_activity is read once per transaction
        cursor.execute(
            "/* test_rows_update holding */ SELECT wait_event_type, state FROM pg_stat_activity WHERE pid = %s", [pid]
        )
        row = cursor.fetchone()
        if row is None or row[0] == "Lock" or row[1] == "idle":
            return
        time.sleep(0.02)
    raise AssertionError(f"session {pid} neither waited for a lock nor ended its transaction")


@job_kind("test_rows_update", rerun=True)
def test_rows_update(
    ctx: JobContext, *, first: str, second: str | None = None, waiter: int | None = None, nowait: bool = False
) -> dict[str, Any]:
    """Lock the job rows `first`, then `second`, in one transaction (NOWAIT: fail at once when one is
    locked). With `waiter`, take the second only once that session waits for a lock (or has ended its
    transaction), so that a test can close a deadlock in a known order."""
    from django.db import connection, transaction

    ctx.log("updating")
    lock = "SELECT 1 FROM jobs_job WHERE uuid = %s FOR UPDATE NOWAIT" if nowait else None
    update = "/* test_rows_update */ UPDATE jobs_job SET message = 'touched' WHERE uuid = %s"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(lock or update, [first])
        if waiter is not None:
            _session_waits_or_idles(cursor, waiter)
        if second is not None:
            cursor.execute(update, [second])
    return {"updated": [row for row in (first, second) if row]}


@job_kind("test_duplicate", rerun=True)
def test_duplicate(ctx: JobContext, *, key: str) -> None:
    """Break a unique constraint: an error that running again cannot mend."""
    from django.db import transaction

    from jobs.models import Job

    ctx.log("inserting")
    with transaction.atomic():
        Job.objects.create(kind="test_debounced", debounce_key=key)
        Job.objects.create(kind="test_debounced", debounce_key=key)


@job_kind("test_connection_lost")
def test_connection_lost(ctx: JobContext, *, dsn: str) -> dict[str, Any]:
    """Have another session end this one's connection, then report progress and log (no retry: the kind
    is not `rerun`, so only the progress writes' own handling can keep the job alive)."""
    import psycopg
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])  # returns once it has ended
    ctx.progress(1, 2, "half-way")
    ctx.log("still here")
    ctx.progress(2, 2, "done")
    return {"terminated": pid}
