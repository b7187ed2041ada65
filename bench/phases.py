"""Phase timing for the benchmark scripts: wrap a function of a module for the duration of a run
(in this process only; the project's files are not touched) and time each SQL statement that goes
through Django's default connection."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection


@dataclass
class PhaseLog:
    """Start and end times (perf_counter) of named phases, and each SQL statement's duration."""

    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    statements: list[tuple[float, float, str]] = field(default_factory=list)

    def seconds(self, name: str) -> float:
        return self.ends[name] - self.starts[name]

    def statements_between(self, start: float, end: float) -> list[tuple[float, str]]:
        """(seconds, sql) of the statements that began within [start, end]."""
        return [(seconds, sql) for began, seconds, sql in self.statements if start <= began <= end]


def _wrap_call(log: PhaseLog, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        log.starts[name] = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            log.ends[name] = time.perf_counter()

    return wrapper


def _wrap_generator(log: PhaseLog, name: str, function: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        log.starts[name] = time.perf_counter()
        try:
            yield from function(*args, **kwargs)
        finally:
            log.ends[name] = time.perf_counter()

    return wrapper


@contextmanager
def phases_recorded(
    calls: list[tuple[object, str]], generators: list[tuple[object, str]] | None = None
) -> Iterator[PhaseLog]:
    """Time `module.function` for each (module, "function") pair, and every SQL statement on the
    default connection, while the block runs; the originals are put back afterwards."""
    log = PhaseLog()

    def statement_timer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            log.statements.append((began, time.perf_counter() - began, " ".join(str(sql).split())))

    originals: list[tuple[object, str, Any]] = []
    try:
        for module, attribute in calls:
            original = getattr(module, attribute)
            originals.append((module, attribute, original))
            setattr(module, attribute, _wrap_call(log, attribute, original))
        for module, attribute in generators or []:
            original = getattr(module, attribute)
            originals.append((module, attribute, original))
            setattr(module, attribute, _wrap_generator(log, attribute, original))
        with connection.execute_wrapper(statement_timer):
            yield log
    finally:
        for module, attribute, original in reversed(originals):
            setattr(module, attribute, original)


def statement_lines(statements: list[tuple[float, str]], *, width: int = 110) -> list[str]:
    """Printable lines, one per statement: seconds and the start of its SQL."""
    return [f"    {seconds:8.3f} s  {sql[:width]}" for seconds, sql in statements]
