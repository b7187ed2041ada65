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


JOB_KINDS: dict[str, JobKind] = {}


def job_kind(name: str, *, debounced: bool = False) -> Callable:
    """Register `function(ctx, **params) -> result dict` as the job kind `name`."""

    def register(function: Callable[..., dict[str, Any] | None]) -> Callable[..., dict[str, Any] | None]:
        if name in JOB_KINDS and JOB_KINDS[name].function is not function:
            raise RuntimeError(f"job kind {name!r} is registered twice")
        summary = (function.__doc__ or name).strip().splitlines()[0]
        JOB_KINDS[name] = JobKind(name=name, function=function, debounced=debounced, summary=summary)
        return function

    return register


def job_kind_get(name: str) -> JobKind | None:
    return JOB_KINDS.get(name)
