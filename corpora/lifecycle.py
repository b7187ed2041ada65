"""The task lifecycle: every set-based statement that changes tasks and their log messages.

Task creation (import, extend, activation), lease, release, reap, invalidation of refused entries,
applying results, pause, resume, rerun and purge live here, beside the Task model, with the one
message writer (`MESSAGE_COLUMNS`, `messages_copy`). The dispatcher keeps sockets, processes and
batching; corpora, services and reports keep validation, jobs and journaling; all of them call this
module. Statuses come from `corpora.statuses`; none is spelled here as a number.

The statements are tuned (index probes, statement order for locks, WAL compression of the rerun;
docs/decisions.md, "Task lifecycle", "Dispatcher and workers" and "Reports"): change them with a benchmark.
"""

# ruff: noqa: S608  (every statement here is built of fixed text and vocabulary constants; values are parameters)
from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from conversion.logparse import Message
from conversion.severities import INVALID_CATEGORY, Severity
from corpora.statuses import (
    BLOCKED,
    BLOCKED_SQL,
    FATAL,
    IN_PROGRESS_SQL,
    INVALID,
    LEASED_SQL,
    NO_PROBLEM,
    TODO,
)

logger = logging.getLogger(__name__)

# The columns of a log message row, in the order every writer gives them.
MESSAGE_COLUMNS = "task_id, corpus_id, service_id, task_status, severity, category, what, details"
NEVER_COMPLETED = (Severity.FATAL, "cortex", "never_completed_with_retries")

# --- creation ------------------------------------------------------------------------------------


def import_tasks_create(cursor: CursorWrapper, *, corpus_id: int, import_service_id: int) -> None:
    """One import task per row of the import's `import_entries` table (no_problem, or invalid when the
    entry has a problem) and a Fatal:invalid message for each invalid one."""
    cursor.execute(
        "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
        f" SELECT %s, %s, document_id, CASE WHEN problem = '' THEN {NO_PROBLEM} ELSE {INVALID} END"
        " FROM import_entries",
        [corpus_id, import_service_id],
    )
    cursor.execute(
        f"INSERT INTO reports_logmessage ({MESSAGE_COLUMNS})"
        f" SELECT t.id, t.corpus_id, t.service_id, t.status, '{Severity.FATAL}', '{INVALID_CATEGORY}',"
        " e.problem, e.detail"
        " FROM import_entries e JOIN corpora_task t ON t.document_id = e.document_id AND t.service_id = %s"
        " WHERE e.problem <> ''",
        [import_service_id],
    )


def extend_tasks_create(cursor: CursorWrapper, *, corpus_id: int) -> int:
    """TODO tasks on every activated service of the corpus for the valid rows of `import_entries`."""
    cursor.execute(
        "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
        f" SELECT a.corpus_id, a.service_id, e.document_id, {TODO}"
        " FROM import_entries e CROSS JOIN corpora_activation a"
        " WHERE a.corpus_id = %s AND e.problem = ''",
        [corpus_id],
    )
    return cursor.rowcount


def activation_tasks_create(*, corpus_id: int, service_id: int, import_service_id: int) -> int:
    """One TODO task of the service per document of the corpus whose import was valid; tasks that exist
    already are left as they are. Returns how many were created."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            f" SELECT i.corpus_id, %s, i.document_id, {TODO} FROM corpora_task i"
            f" WHERE i.corpus_id = %s AND i.service_id = %s AND i.status <> {INVALID}"
            " ON CONFLICT (service_id, document_id) DO NOTHING",
            [service_id, corpus_id, import_service_id],
        )
        return cursor.rowcount


# --- leases --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeasedTask:
    id: int
    corpus_id: int
    service_id: int
    path: Path
    kind: str
    entry: str


def lease_batch(*, service_id: int, limit: int, mark: int, lease_seconds: int) -> list[LeasedTask]:
    """Claim up to `limit` TODO tasks of a service: one statement, rows other dispatchers hold skipped.
    The lease length is captured on each task now, so a later override changes only later leases."""
    if limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH picked AS (
                SELECT id FROM corpora_task
                 WHERE service_id = %(service)s AND status = {TODO}
                 ORDER BY id LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED
            )
            UPDATE corpora_task t
               SET status = %(mark)s, attempts = t.attempts + 1, lease_seconds = %(lease)s,
                   leased_until = now() + make_interval(secs => %(lease)s)
              FROM picked, corpora_document d, corpora_corpus c
             WHERE t.id = picked.id AND d.id = t.document_id AND c.id = t.corpus_id
            RETURNING t.id, t.corpus_id, t.service_id, c.path, d.kind, d.entry
            """,
            {"service": service_id, "limit": limit, "mark": mark, "lease": lease_seconds},
        )
        rows = cursor.fetchall()
    return [LeasedTask(i, c, s, Path(path) / entry, kind, entry) for i, c, s, path, kind, entry in rows]


def lease_release(task_ids: list[int], *, mark: int) -> int:
    """Give back leased tasks that were never sent to a worker: TODO again, the attempt not counted."""
    if not task_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE corpora_task SET status = {TODO}, leased_until = NULL, attempts = GREATEST(attempts - 1, 0)"
            " WHERE id = ANY(%s) AND status = %s",
            [task_ids, mark],
        )
        return cursor.rowcount


def leases_expire(task_ids: list[int]) -> int:
    """End the leases of `task_ids` now (their worker went silent): the next reap (`leases_reap`) takes
    them back to TODO, the attempt counted, or makes those out of attempts fatal. Returns how many."""
    if not task_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE corpora_task SET leased_until = now() - interval '1 second' WHERE id = ANY(%s) AND {LEASED_SQL}",
            [task_ids],
        )
        return cursor.rowcount


def leased_count(*, mark: int) -> int:
    """How many tasks carry this lease mark."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM corpora_task WHERE status = %s", [mark])
        return cursor.fetchone()[0]


def still_leased(task_ids: list[int], *, mark: int) -> set[int]:
    """Those of `task_ids` that still carry this lease mark (not paused, rerun or deleted meanwhile)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM corpora_task WHERE id = ANY(%s) AND status = %s", [task_ids, mark])
        return {row[0] for row in cursor.fetchall()}


@dataclass(frozen=True)
class Reaped:
    returned: int  # to TODO
    fatal: int
    pairs: set[tuple[int, int]]  # (corpus, service) of the tasks made fatal: their runs may have drained


def leases_reap(*, max_attempts: int) -> Reaped:
    """Return expired leases to TODO; a task that used all its attempts becomes fatal with the message
    cortex:never_completed_with_retries. The caller closes the drained runs of the pairs it returns in
    its transaction (corpora.pairs.runs_close_drained), as ingestion does."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE corpora_task
               SET status = CASE WHEN attempts >= %s THEN {FATAL} ELSE {TODO} END, leased_until = NULL
             WHERE {LEASED_SQL} AND leased_until < now()
            RETURNING id, corpus_id, service_id, status
            """,
            [max_attempts],
        )
        rows = cursor.fetchall()
        fatal = [(task_id, corpus_id, service_id) for task_id, corpus_id, service_id, status in rows if status == FATAL]
        if fatal:
            ids = [row[0] for row in fatal]
            cursor.execute("DELETE FROM reports_logmessage WHERE task_id = ANY(%s)", [ids])
            severity, category, what = NEVER_COMPLETED
            cursor.execute(
                f"INSERT INTO reports_logmessage ({MESSAGE_COLUMNS})"
                " SELECT t.id, t.corpus_id, t.service_id, t.status, %s, %s, %s,"
                " 'no result came back after ' || t.attempts || ' attempts'"
                " FROM corpora_task t WHERE t.id = ANY(%s)",
                [severity, category, what, ids],
            )
    if rows:
        logger.info("reaped %d expired leases (%d now fatal)", len(rows), len(fatal))
    return Reaped(len(rows) - len(fatal), len(fatal), {(corpus_id, service_id) for _, corpus_id, service_id in fatal})


def leases_invalidate(refused: list[tuple[int, str, str]], *, mark: int) -> set[tuple[int, int]]:
    """Make leased tasks whose entry must not be packed invalid at once, not retried, each with a
    Fatal:invalid:<what> message; `refused` holds (task id, what, details). Returns the (corpus, service)
    pairs touched; the caller closes their drained runs in its transaction, as ingestion does."""
    if not refused:
        return set()
    ids = [task_id for task_id, _, _ in refused]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE corpora_task t SET status = {INVALID}, leased_until = NULL FROM unnest(%s::bigint[]) AS v(id)"
            " WHERE t.id = v.id AND t.status = %s RETURNING t.id, t.corpus_id, t.service_id",
            [ids, mark],
        )
        rows = cursor.fetchall()
        if not rows:
            return set()
        cursor.execute("DELETE FROM reports_logmessage WHERE task_id = ANY(%s)", [[row[0] for row in rows]])
        cursor.execute(
            f"INSERT INTO reports_logmessage ({MESSAGE_COLUMNS})"
            f" SELECT t.id, t.corpus_id, t.service_id, t.status, '{Severity.FATAL}', '{INVALID_CATEGORY}', v.what,"
            " left(v.details, 2000)"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, what, details)"
            " JOIN corpora_task t ON t.id = v.id WHERE t.id = ANY(%s)",
            [ids, [r[1] for r in refused], [r[2] for r in refused], [row[0] for row in rows]],
        )
        pairs = {(corpus_id, service_id) for _, corpus_id, service_id in rows}
    logger.info("made %d task(s) invalid: their entries cannot be packed", len(rows))
    return pairs


# --- results -------------------------------------------------------------------------------------


class TaskResult(Protocol):
    """What a decoded result brings to its task: status, messages, runtime."""

    @property
    def status(self) -> int: ...
    @property
    def messages(self) -> list[Message]: ...
    @property
    def runtime_ms(self) -> int | None: ...


@dataclass(frozen=True)
class Locked:
    """A leased task locked for its result."""

    corpus_id: int
    service_id: int
    attempts: int


def results_lock(cursor: CursorWrapper, task_ids: list[int]) -> dict[int, Locked]:
    """Lock the leased ones of `task_ids` for applying their results."""
    cursor.execute(
        f"SELECT id, corpus_id, service_id, attempts FROM corpora_task WHERE id = ANY(%s) AND {LEASED_SQL} FOR UPDATE",
        [task_ids],
    )
    return {row[0]: Locked(*row[1:]) for row in cursor.fetchall()}


def results_retry(cursor: CursorWrapper, task_ids: list[int]) -> None:
    """Send tasks locked by `results_lock` back to TODO without applying their result (the worker's
    governor stopped them): the attempt stays counted, and their previous messages stay as they were."""
    if task_ids:
        cursor.execute(f"UPDATE corpora_task SET status = {TODO}, leased_until = NULL WHERE id = ANY(%s)", [task_ids])


def results_write(cursor: CursorWrapper, rows: Sequence[tuple[int, int, int, TaskResult]]) -> None:
    """Apply results locked by `results_lock`: (task, corpus, service, result) rows replace each task's
    messages and runtime and set its status, in the caller's transaction."""
    ids = [row[0] for row in rows]
    # Joined with the ids so that the plan is an index probe per task whatever the statistics say:
    # `task_id = ANY(...)` on a table analyzed while small becomes a sequential scan per batch.
    for table in ("reports_logmessage", "reports_taskruntime"):
        cursor.execute(f"DELETE FROM {table} x USING unnest(%s::bigint[]) AS v(id) WHERE x.task_id = v.id", [ids])
    messages_copy(cursor, _result_messages(rows))
    runtimes = [(t, c, s, r.runtime_ms) for t, c, s, r in rows if r.runtime_ms is not None]
    if runtimes:
        copy_runtimes = "COPY reports_taskruntime (task_id, corpus_id, service_id, runtime_ms) FROM STDIN"
        with cursor.cursor.copy(copy_runtimes) as copy:
            for row in runtimes:
                copy.write_row(row)
    # Last: its statement trigger locks the pair's task-count rows until the commit, and the dispatcher's
    # next lease, which counts into the same rows, waits for that lock.
    cursor.execute(
        "UPDATE corpora_task t SET status = v.status, leased_until = NULL"
        " FROM unnest(%s::bigint[], %s::integer[]) AS v(id, status) WHERE t.id = v.id",
        [ids, [row[3].status for row in rows]],
    )


def _result_messages(rows: Sequence[tuple[int, int, int, TaskResult]]) -> Iterator[tuple[Any, ...]]:
    for task_id, corpus_id, service_id, result in rows:
        status = result.status
        for m in result.messages:
            yield (task_id, corpus_id, service_id, status, m.severity, m.category, m.what, m.details)


def messages_copy(cursor: CursorWrapper, rows: Iterable[tuple[Any, ...]]) -> None:
    """The message writer: COPY rows of MESSAGE_COLUMNS into the message table. A message carries its
    task's final status (the table is partitioned by it), so write it with or after that status."""
    with cursor.cursor.copy(f"COPY reports_logmessage ({MESSAGE_COLUMNS}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


# --- pause, resume, rerun ------------------------------------------------------------------------


def tasks_pause(*, corpus_id: int | None = None, service_id: int | None = None) -> int:
    """Block every task in progress (TODO or leased) of a pair, or of all pairs. Returns how many."""
    return _statuses_update(
        f"SET status = {BLOCKED}, leased_until = NULL", IN_PROGRESS_SQL, corpus_id=corpus_id, service_id=service_id
    )


def tasks_resume(*, corpus_id: int | None = None, service_id: int | None = None) -> int:
    """Put every blocked task of a pair, or of all pairs, back to TODO. Returns how many."""
    return _statuses_update(f"SET status = {TODO}", BLOCKED_SQL, corpus_id=corpus_id, service_id=service_id)


def _statuses_update(assignment: str, condition: str, *, corpus_id: int | None, service_id: int | None) -> int:
    where, params = [condition], []
    if corpus_id is not None:
        where.append("corpus_id = %s AND service_id = %s")
        params += [corpus_id, service_id]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE corpora_task {assignment} WHERE {' AND '.join(where)}", params)
        return cursor.rowcount


# The rerun's joins probe each table's task index once per task in scope instead of hashing the scope
# against a scan of the whole table. The planner, which takes a task to have 80 messages where it has 10
# to 15, always chose the scan. Measured on 1M tasks / 10M messages (bench/README.md), after a
# CHECKPOINT: for 100,000 tasks the message DELETE took 3.2 s instead of 4.6-4.7 s (it reads only the
# 136,000 pages it changes, not all 255,000), the runtime DELETE 0.7-1.0 s instead of 0.9 s, the
# UPDATE 1.5-1.8 s instead of 1.7-2.1 s; for 600,000 tasks (7.5M messages) both ways took the same.
# Since the messages are partitioned by status (migration 0009), the DELETE changes 94,000 pages of the
# error partition instead of 136,000 of the whole table: 2.9-3.2 s instead of 4.1-5.0 s.
_RERUN_SETTINGS = ("SET LOCAL enable_hashjoin = off", "SET LOCAL enable_mergejoin = off")


def wal_compress(cursor: Any) -> bool:
    """Compress the WAL of the current transaction with lz4, where the server compresses none, has lz4
    and lets this role set `wal_compression` (a superuser, or a role granted `SET ON PARAMETER
    wal_compression`). Returns whether the transaction's WAL is compressed.

    A bulk change of old rows (a rerun's DELETE and UPDATE) writes each page it changes whole into the
    WAL once after a checkpoint: 1.4 GB for a rerun of 100,000 of 1M tasks, past the ~540 MB at which a
    server with the default `max_wal_size` starts a checkpoint, which then competes with it for the
    disk. lz4 makes it 0.53 GB (bench/README.md)."""
    cursor.execute(
        "SELECT setting, 'lz4' = ANY(enumvals), has_parameter_privilege('wal_compression', 'SET')"
        " FROM pg_settings WHERE name = 'wal_compression'"
    )
    setting, has_lz4, allowed = cursor.fetchone()
    if setting != "off":
        return True
    if not (has_lz4 and allowed):
        logger.info("WAL of a bulk change left uncompressed: %s", "no lz4" if not has_lz4 else "no SET privilege")
        return False
    cursor.execute("SET LOCAL wal_compression = lz4")
    return True


def tasks_rerun(
    *,
    corpus_id: int,
    service_id: int,
    statuses: Sequence[int],
    message_severity: str | None,
    category: str | None,
    what: str | None,
    bulk_settings: Sequence[str],
) -> int:
    """Set the tasks of a pair whose status is one of `statuses` (and, given a category, and a what, that
    have such a `message_severity` message) back to TODO, deleting their messages and runtimes. Runs in
    the caller's transaction (or one of its own); `bulk_settings` and the rerun's own hold until it ends.
    Returns how many tasks were set TODO."""
    status_list = list(statuses)  # a parameter of every statement below
    if category:
        # The tasks with such a message: one range of the message index, since messages carry their
        # task's status (only completed tasks have messages, and their status cannot change under them).
        conditions = ["m.corpus_id = %s", "m.service_id = %s", "m.task_status = ANY(%s)", "m.severity = %s"]
        conditions += ["m.category = %s", "m.what = %s"] if what else ["m.category = %s"]
        where = " AND ".join(conditions)  # fixed fragments only; every value is a parameter
        scope = f"SELECT DISTINCT m.task_id AS id FROM reports_logmessage m WHERE {where} ORDER BY 1"
        params: list[Any] = [corpus_id, service_id, status_list, message_severity, category]
        params += [what] if what else []
    else:
        scope = (
            "SELECT t.id FROM corpora_task t WHERE t.corpus_id = %s AND t.service_id = %s AND t.status = ANY(%s)"
            " ORDER BY 1"
        )
        params = [corpus_id, service_id, status_list]
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        # Only fixed fragments are joined into the scope; every value goes in as a parameter. The scope is
        # in task order, so the probes below walk each index (and, as tasks are written in about that
        # order, each table) forwards.
        cursor.execute(f"CREATE TEMP TABLE rerun_scope ON COMMIT DROP AS {scope}", params)
        for statement in (*bulk_settings, *_RERUN_SETTINGS):
            cursor.execute(statement)
        wal_compress(cursor)
        # The messages carry the status of their task, so the statuses in scope name the partitions that
        # hold them (migration 0009); each task is looked up in those partitions' task indexes only.
        cursor.execute(
            "DELETE FROM reports_logmessage m USING rerun_scope s WHERE m.task_id = s.id AND m.task_status = ANY(%s)",
            [status_list],
        )
        cursor.execute("DELETE FROM reports_taskruntime r USING rerun_scope s WHERE r.task_id = s.id")
        # The status is checked again: a task another rerun set TODO meanwhile (and a dispatcher leased)
        # keeps its lease.
        cursor.execute(
            f"UPDATE corpora_task t SET status = {TODO}, attempts = 0, leased_until = NULL FROM rerun_scope s"
            " WHERE t.id = s.id AND t.status = ANY(%s)",
            [status_list],
        )
        count = cursor.rowcount
        cursor.execute("DROP TABLE rerun_scope")
    return count


# --- purge and report grains ---------------------------------------------------------------------


def tasks_purge(*, corpus_id: int | None = None, service_id: int | None = None) -> dict[str, int]:
    """Delete the tasks of a corpus, of a service or of one (corpus, service) pair, with their messages,
    runtimes, counts and report grains, in the caller's transaction (or one of its own). Returns
    {"messages": n, "tasks": n}; documents, activations, runs and the corpus or service row are the caller's."""
    where, params = [], []
    for column, value in (("corpus_id", corpus_id), ("service_id", service_id)):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    if not where:
        raise ValueError("tasks_purge needs a corpus, a service or both")
    scope = " AND ".join(where)  # fixed fragments; the ids are parameters
    counts = {}
    tables = ["reports_taskruntime", "corpora_task", "corpora_taskcount", "reports_reportgrain", "reports_grainslice"]
    if corpus_id is None:
        tables.insert(1, "reports_runtimecount")  # kept per service: gone with the service's last runtime
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM reports_logmessage WHERE {scope}", params)
        counts["messages"] = cursor.rowcount
        for table in tables:
            cursor.execute(f"DELETE FROM {table} WHERE {scope}", params)
            if table == "corpora_task":
                counts["tasks"] = cursor.rowcount
    return counts


def grains_clear(pairs: set[tuple[int, int]] | list[tuple[int, int]]) -> int:
    """Forget the built report slices of these (corpus, service) pairs; pages rebuild them when next read.
    Returns how many slices were cleared."""
    pairs = list(pairs)
    if not pairs:
        return 0
    keys = [[c for c, _ in pairs], [s for _, s in pairs]]
    using = " USING unnest(%s::bigint[], %s::bigint[]) AS p(c, s) WHERE x.corpus_id = p.c AND x.service_id = p.s"
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM reports_grainslice x" + using, keys)
        cleared = cursor.rowcount
        cursor.execute("DELETE FROM reports_reportgrain x" + using, keys)
    return cleared


# --- sandbox corpora -----------------------------------------------------------------------------


def sandbox_tasks_create(cursor: CursorWrapper, *, corpus_id: int, import_service_id: int) -> int:
    """One import task per document of a freshly carved sandbox, no_problem as a valid import's: every
    document was taken from a valid document of its parent. Returns how many were created."""
    cursor.execute(
        "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
        f" SELECT d.corpus_id, %s, d.id, {NO_PROBLEM} FROM corpora_document d WHERE d.corpus_id = %s",
        [import_service_id, corpus_id],
    )
    return cursor.rowcount
