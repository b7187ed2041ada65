"""The table-ownership check: no app writes a table of another app.

Each table belongs to the app whose models declare it (`Model._meta.db_table`). While the suite runs,
`OwnershipWatch` sees every statement that the Django connections execute (an execute wrapper on each
connection as it connects) and every COPY issued through a psycopg cursor. For a statement that writes
(INSERT, UPDATE, DELETE, TRUNCATE, COPY ... FROM) a table of a project app, the writer is the app of the
innermost frame of the call stack that lies in a project package; a write whose innermost project frame
is in a test, a benchmark or a migration is not an app's write and is not checked. The session fails
when an app wrote a table it does not own (tests/conftest.py, `pytest_sessionfinish`).

Statements that triggers issue are not seen: a trigger belongs to its table's owner (the migrations that
create it). Nor are those of child processes (the dispatcher's sink, `manage.py` commands the tests
start); their code paths are the ones the in-process tests call.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from tests.support import PROJECT_DIR

# The packages of the project, in the order of the import layers (pyproject.toml), and the command line.
PROJECT_PACKAGES = (
    "wiring", "ops", "dispatcher", "reports", "runs", "corpora", "services", "jobs", "accounts", "config",
    "conversion", "cli",
)  # fmt: skip
# Code that may write any table: it is not an app's.
NOT_APPS = ("tests", "bench")

_TARGET = r'(?:ONLY\s+)?(?:"?\w+"?\.)?"?(\w+)"?'
_WRITE = re.compile(rf"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+{_TARGET}", re.IGNORECASE)
_COPY_IN = re.compile(rf"\bCOPY\s+{_TARGET}\s*(?:\([^)]*\))?\s*FROM\b", re.IGNORECASE)
_TRUNCATE = re.compile(r"\bTRUNCATE\s+(?:TABLE\s+)?([^;]*)", re.IGNORECASE)


def written_tables(sql: str) -> set[str]:
    """The tables a statement writes: the targets of its INSERT, UPDATE and DELETE (data-modifying CTEs
    too), TRUNCATE and COPY ... FROM, in lower case. Words that follow UPDATE but name no table (SET in
    ON CONFLICT DO UPDATE SET, OF in FOR UPDATE OF) are among them; no app owns such a table."""
    found = {name.lower() for name in _WRITE.findall(sql)}
    found.update(name.lower() for name in _COPY_IN.findall(sql))
    for listed in _TRUNCATE.findall(sql):
        for part in listed.split(","):
            words = part.replace("ONLY ", "").split()
            if words:
                found.add(words[0].strip('"').split(".")[-1].strip('"').lower())
    return found


def table_owners() -> dict[str, str]:
    """Each table of a project app, with the app whose models declare it."""
    from django.apps import apps

    return {
        model._meta.db_table: model._meta.app_label
        for model in apps.get_models(include_auto_created=True)
        if model._meta.app_label in PROJECT_PACKAGES
    }


def writer_of(filenames: Iterable[str]) -> tuple[str, str] | None:
    """The app that writes, and where, from the files of a call stack, innermost first: the first file in
    a project package. None when that file is a test, a benchmark or a migration, or none is the project's."""
    for filename in filenames:
        try:
            relative = Path(filename).resolve().relative_to(PROJECT_DIR)
        except ValueError:
            continue
        top = relative.parts[0]
        if top in NOT_APPS or "migrations" in relative.parts:
            return None
        if top in PROJECT_PACKAGES:
            return top, str(relative)
    return None


def _stack_files(frame: FrameType | None) -> Iterator[str]:
    """The files of a call stack, innermost first, without this module's (another watch wrapping the call)."""
    while frame is not None:
        if frame.f_code.co_filename != __file__:
            yield frame.f_code.co_filename
        frame = frame.f_back


@dataclass(frozen=True)
class Violation:
    app: str
    table: str
    owner: str
    where: str
    statement: str

    def __str__(self) -> str:
        return f"{self.app} writes {self.table} (owned by {self.owner}) at {self.where}: {self.statement[:160]}"


def violations_of(sql: str, filenames: Iterable[str], owners: dict[str, str]) -> list[Violation]:
    """The writes of a statement, issued from the call stack `filenames` (innermost first), that its
    writer does not own."""
    tables = [table for table in written_tables(sql) if table in owners]
    if not tables:
        return []
    writer = writer_of(filenames)
    if writer is None:
        return []
    app, where = writer
    statement = " ".join(sql.split())
    return [Violation(app, table, owners[table], where, statement) for table in tables if owners[table] != app]


class OwnershipWatch:
    """Watches the statements of every Django connection and every psycopg COPY of this process, and
    keeps the writes whose app does not own the table."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.statements = 0
        self._owners: dict[str, str] | None = None
        self._paused = threading.local()
        self._undo: list[Callable[[], None]] = []

    @property
    def owners(self) -> dict[str, str]:
        if self._owners is None:
            self._owners = table_owners()
        return self._owners

    def see(self, sql: Any, frame: FrameType | None) -> None:
        if getattr(self._paused, "on", False) or not isinstance(sql, str):
            return
        self.statements += 1
        found = violations_of(sql, _stack_files(frame), self.owners)
        if found:
            self.violations.extend(found)

    def __call__(self, execute: Callable, sql: Any, params: Any, many: bool, context: dict) -> Any:
        self.see(sql, sys._getframe(1))
        return execute(sql, params, many, context)

    def _watch_connection(self, connection: Any, **_: Any) -> None:
        # First in the list: a caller's own `execute_wrapper` block pops the last one.
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.insert(0, self)

    def install(self) -> None:
        """Watch every Django connection (those open now and each that connects later) and psycopg's COPY."""
        import psycopg
        from django.db import connections
        from django.db.backends.signals import connection_created

        connection_created.connect(self._watch_connection, weak=False)
        self._undo.append(lambda: connection_created.disconnect(self._watch_connection))
        for connection in connections.all(initialized_only=True):
            self._watch_connection(connection)
        original_copy = psycopg.Cursor.copy
        watch = self

        def copy(cursor: Any, statement: Any, *args: Any, **kwargs: Any) -> Any:
            watch.see(statement if isinstance(statement, str) else str(statement), sys._getframe(1))
            return original_copy(cursor, statement, *args, **kwargs)

        psycopg.Cursor.copy = copy
        self._undo.append(lambda: setattr(psycopg.Cursor, "copy", original_copy))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Not watching this thread's statements: a test that writes another app's table on purpose."""
        self._paused.on = True
        try:
            yield
        finally:
            self._paused.on = False


WATCH = OwnershipWatch()
