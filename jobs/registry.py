"""The job kinds: each app's tasks.py registers its background jobs here, one decorator line each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JobKind:
    name: str
    function: Callable[..., dict[str, Any] | None]
    debounced: bool
    summary: str
    # The runner runs the whole function again after a transient database error (a deadlock, a lost
    # connection): only for a kind that is safe to run again after an attempt that stopped half-way.
    rerun: bool = False
    # Kinds of one lane never run at the same time (jobs/runner.py takes the lane's lock around them).
    lane: str | None = None


JOB_KINDS: dict[str, JobKind] = {}
JobFunction = Callable[..., dict[str, Any] | None]


def job_kind(
    name: str, *, debounced: bool = False, rerun: bool = False, lane: str | None = None
) -> Callable[[JobFunction], JobFunction]:
    """Register `function(ctx, **params) -> result dict` as the job kind `name`; `rerun` says that it may
    be run again whole after a transient database error, `lane` names the kinds it must not run beside."""

    def register(function: JobFunction) -> JobFunction:
        if name in JOB_KINDS and JOB_KINDS[name].function is not function:
            raise RuntimeError(f"job kind {name!r} is registered twice")
        summary = (function.__doc__ or name).strip().splitlines()[0]
        JOB_KINDS[name] = JobKind(
            name=name, function=function, debounced=debounced, summary=summary, rerun=rerun, lane=lane
        )
        return function

    return register


def job_kind_get(name: str) -> JobKind | None:
    return JOB_KINDS.get(name)


def lane_kinds(lane: str) -> list[str]:
    """The names of the kinds that run in `lane`."""
    return sorted(kind.name for kind in JOB_KINDS.values() if kind.lane == lane)
