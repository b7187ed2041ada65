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
    """Report a setting as the process running the job sees it (configuration changes at run time)."""
    from django.conf import settings

    return {"value": getattr(settings, name)}
