"""Task status changes: every set-based statement that creates tasks or changes their status.

Task creation (import, extend, activation, sandbox), lease, release, reap, invalidation of refused
entries, applying results (with their runtimes), pause, resume, rerun and purge live here, beside the Task
model. The messages that go with a status are written, retired and deleted by the message store
(corpora.message_store), in the same transactions. The dispatcher keeps sockets, processes and batching;
corpora, services and reports keep validation, jobs and journaling; all of them call this module.
Statuses come from `corpora.statuses`; none is spelled here as a number.

The statements are tuned (index probes, statement order for locks, WAL compression of the rerun;
docs/decisions/task-lifecycle.md, dispatcher-ingestion.md and rerun.md): change them with a benchmark.
"""

# ruff: noqa: S608  (every statement here is built of fixed text, table names and vocabulary constants; values are parameters)
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from conversion.choices import Category, InfrastructureReason, Severity, TaskStatus
from conversion.logparse import DETAILS_MAX, Message
from corpora.choices import ClassLevel
from corpora.grains import grains_purge
from corpora.message_store import (
    PROBE_SETTINGS,
    messages_delete,
    messages_purge,
    messages_retire,
    messages_write,
    wal_compress,
)
from corpora.models import RUNTIME_BIN_MS
from corpora.statuses import BLOCKED_SQL, IN_PROGRESS_SQL, LEASED_SQL
from corpora.tables import (
    ACTIVATION_TABLE,
    CORPUS_TABLE,
    DOCUMENT_TABLE,
    MESSAGE_CLASS_TABLE,
    RUN_TABLE,
    RUNTIME_BIN_TABLE,
    RUNTIME_COUNT_TABLE,
    TASK_CLASS_TABLE,
    TASK_COUNT_TABLE,
    TASK_RUNTIME_TABLE,
    TASK_TABLE,
)
from corpora.telemetry import LEASE_WAITS_CTE

logger = logging.getLogger(__name__)

# --- creation ------------------------------------------------------------------------------------


def import_tasks_create(cursor: CursorWrapper, *, corpus_id: int, import_service_id: int) -> None:
    """One import task per row of the import's `import_entries` table (no_problem, or invalid when the
    entry has a problem) and a Fatal:invalid message for each invalid one."""
    cursor.execute(
        f"INSERT INTO {TASK_TABLE} (corpus_id, service_id, document_id, status)"
        f" SELECT %s, %s, document_id,"
        f" CASE WHEN problem = '' THEN {TaskStatus.NO_PROBLEM} ELSE {TaskStatus.INVALID} END"
        " FROM import_entries",
        [corpus_id, import_service_id],
    )
    cursor.execute(
        "SELECT t.id, t.corpus_id, t.service_id, t.status, e.problem, e.detail"
        f" FROM import_entries e JOIN {TASK_TABLE} t ON t.document_id = e.document_id AND t.service_id = %s"
        " WHERE e.problem <> '' ORDER BY t.id",
        [import_service_id],
    )
    invalid = cursor.fetchall()
    messages_write(
        cursor,
        (
            (t, c, s, status, [(Severity.FATAL, Category.INVALID, problem, detail)])
            for t, c, s, status, problem, detail in invalid
        ),
    )


def extend_tasks_create(cursor: CursorWrapper, *, corpus_id: int) -> int:
    """TODO tasks on every activated service of the corpus for the valid rows of `import_entries`."""
    # Each service's median is read once (a CTE), not once per new task; a new document goes in the middle.
    cursor.execute(
        f"WITH a AS MATERIALIZED (SELECT a.corpus_id, a.service_id, {_service_median('a.service_id')} AS expected_ms"
        f" FROM {ACTIVATION_TABLE} a WHERE a.corpus_id = %s)"
        f" INSERT INTO {TASK_TABLE} (corpus_id, service_id, document_id, status, expected_ms)"
        f" SELECT a.corpus_id, a.service_id, e.document_id, {TaskStatus.TODO}, a.expected_ms"
        " FROM import_entries e CROSS JOIN a"
        " WHERE e.problem = ''",
        [corpus_id],
    )
    return int(cursor.rowcount)


def _service_median(service: str) -> str:
    """An expression: the middle of the runtime bin that holds the median runtime of the service `service`
    names (the runtime report's trigger-kept bins, a few thousand rows, where a median of the runtimes
    themselves sorts them all: 0.8 s at a million), 0 when it has none: the expected runtime of its tasks
    that have none of their own."""
    return (
        f"coalesce((SELECT b.bin * {RUNTIME_BIN_MS} + {RUNTIME_BIN_MS // 2} FROM (SELECT bin, sum(count) OVER"
        f" (ORDER BY bin) AS running, sum(count) OVER () AS total FROM {RUNTIME_BIN_TABLE}"
        f" WHERE service_id = {service} AND count > 0) b WHERE 2 * b.running >= b.total ORDER BY b.bin LIMIT 1), 0)"
    )


def service_median_ms(cursor: CursorWrapper, *, service_id: int) -> int:
    """The service's median runtime in ms, to its runtime bin's middle (0 when it has none): where a task
    without a runtime of its own is scheduled (Task.expected_ms)."""
    cursor.execute(f"SELECT {_service_median('%s')}", [service_id])
    return int(cursor.fetchone()[0])


def activation_tasks_create(*, corpus_id: int, service_id: int, import_service_id: int) -> int:
    """One TODO task of the service per document of the corpus whose import was valid; tasks that exist
    already are left as they are. Returns how many were created."""
    with connection.cursor() as cursor:
        expected = service_median_ms(cursor, service_id=service_id)
        cursor.execute(
            f"INSERT INTO {TASK_TABLE} (corpus_id, service_id, document_id, status, expected_ms)"
            f" SELECT i.corpus_id, %s, i.document_id, {TaskStatus.TODO}, %s FROM {TASK_TABLE} i"
            f" WHERE i.corpus_id = %s AND i.service_id = %s AND i.status <> {TaskStatus.INVALID}"
            " ON CONFLICT (service_id, document_id) DO NOTHING",
            [service_id, expected, corpus_id, import_service_id],
        )
        return int(cursor.rowcount)


# --- leases --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeasedTask:
    id: int
    corpus_id: int
    service_id: int
    path: Path
    kind: str
    entry: str
    last_worker: str | None = None  # the worker thread that held it when the machine last ended an attempt


# The order leases go out in: longest expected first (an index scan of task_todo_longest_first), or first in,
# first out (task_todo_by_service); the live key dispatcher.longest_first chooses.
_LONGEST_FIRST = "expected_ms DESC, id"
_FIFO = "id"


def lease_batch(
    *, service_id: int, limit: int, mark: int, lease_seconds: int, longest_first: bool = True
) -> list[LeasedTask]:
    """Claim up to `limit` TODO tasks of a service, longest expected runtime first (`Task.expected_ms`) or in
    id order: one statement, rows other dispatchers hold skipped, returned in that order.
    The lease length is captured on each task now, so a later override changes only later leases; the
    same statement counts the tasks' queue waits into their open runs' telemetry (corpora.telemetry)."""
    if limit <= 0:
        return []
    order = _LONGEST_FIRST if longest_first else _FIFO
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH picked AS (
                SELECT id, todo_since FROM {TASK_TABLE}
                 WHERE service_id = %(service)s AND status = {TaskStatus.TODO}
                 ORDER BY {order} LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED
            ), leased AS (
                UPDATE {TASK_TABLE} t
                   SET status = %(mark)s, attempts = t.attempts + 1, lease_seconds = %(lease)s,
                       leased_until = now() + make_interval(secs => %(lease)s)
                  FROM picked, {DOCUMENT_TABLE} d, {CORPUS_TABLE} c
                 WHERE t.id = picked.id AND d.id = t.document_id AND c.id = t.corpus_id
                RETURNING t.id, t.corpus_id, t.service_id, c.path, d.kind, d.entry, picked.todo_since,
                          t.expected_ms, t.last_worker
            ),{LEASE_WAITS_CTE}
            SELECT id, corpus_id, service_id, path, kind, entry, last_worker FROM leased ORDER BY {order}
            """,
            {"service": service_id, "limit": limit, "mark": mark, "lease": lease_seconds},
        )
        rows = cursor.fetchall()
    return [LeasedTask(i, c, s, Path(path) / entry, kind, entry, w) for i, c, s, path, kind, entry, w in rows]


def lease_release(task_ids: list[int], *, mark: int) -> int:
    """Give back leased tasks that were never sent to a worker: TODO again, the attempt not counted."""
    if not task_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TASK_TABLE} SET status = {TaskStatus.TODO}, leased_until = NULL,"
            " attempts = GREATEST(attempts - 1, 0)"
            " WHERE id = ANY(%s) AND status = %s",
            [task_ids, mark],
        )
        return int(cursor.rowcount)


def leases_expire(task_ids: list[int]) -> int:
    """End the leases of `task_ids` now (their worker went silent): the next reap (`leases_reap`) takes
    them back to TODO, the attempt counted, or makes those out of attempts fatal. Returns how many."""
    if not task_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TASK_TABLE} SET leased_until = now() - interval '1 second' WHERE id = ANY(%s) AND {LEASED_SQL}",
            [task_ids],
        )
        return int(cursor.rowcount)


def leases_extend(task_ids: list[int], *, within_seconds: int) -> int:
    """Renew the leases of `task_ids` (their workers' heartbeats say they convert them) that would end
    within `within_seconds`, to twice that from now: a conversion longer than its lease keeps it while its
    worker lives. Each lease grows by what it gains, so its start (leased_until - lease_seconds, which the
    telemetry reads) stays, as in `leases_hold`. Returns how many were renewed."""
    if not task_ids:
        return 0
    gain = "ceil(date_part('epoch', now() + make_interval(secs => 2 * %(within)s) - leased_until))"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TASK_TABLE} SET lease_seconds = lease_seconds + {gain}::int,"
            f" leased_until = leased_until + make_interval(secs => {gain})"
            f" WHERE id = ANY(%(ids)s) AND {LEASED_SQL} AND lease_seconds IS NOT NULL"
            " AND leased_until < now() + make_interval(secs => %(within)s)",
            {"ids": task_ids, "within": within_seconds},
        )
        return int(cursor.rowcount)


def leases_expire_unclaimed(*, mark: int, claimed: list[int]) -> int:
    """End now the leases an earlier dispatcher gave (another mark) that no live worker has claimed since
    this one started (`claimed`: the tasks heartbeats named): their holders died, or the earlier
    dispatcher never sent them. The next reap takes them back, the attempt counted."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TASK_TABLE} SET leased_until = now() - interval '1 second'"
            f" WHERE {LEASED_SQL} AND status <> %s AND id <> ALL(%s) AND leased_until >= now()",
            [mark, claimed],
        )
        return int(cursor.rowcount)


def leases_hold(*, seconds: int) -> int:
    """Keep every running lease for at least `seconds` more (those with less left get twice that): while the
    sink cannot take results, a task whose result waits in a worker must not go back for want of it. Each
    lease grows by what it gains, so its start (leased_until - lease_seconds, which the telemetry reads)
    stays. Leases already ended (a silent worker's) are left to the reaper. Returns how many were lengthened."""
    gain = "ceil(date_part('epoch', now() + make_interval(secs => 2 * %(hold)s) - leased_until))"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TASK_TABLE} SET lease_seconds = lease_seconds + {gain}::int,"
            f" leased_until = leased_until + make_interval(secs => {gain})"
            f" WHERE {LEASED_SQL} AND leased_until >= now()"
            " AND leased_until < now() + make_interval(secs => %(hold)s)",
            {"hold": seconds},
        )
        return int(cursor.rowcount)


def leased_count(*, mark: int) -> int:
    """How many tasks carry this lease mark."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TASK_TABLE} WHERE status = %s", [mark])
        return int(cursor.fetchone()[0])


def still_leased(task_ids: list[int], *, mark: int) -> set[int]:
    """Those of `task_ids` that still carry this lease mark (not paused, rerun or deleted meanwhile)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {TASK_TABLE} WHERE id = ANY(%s) AND status = %s", [task_ids, mark])
        return {row[0] for row in cursor.fetchall()}


@dataclass(frozen=True)
class Reaped:
    returned: int  # to TODO
    fatal: int
    pairs: set[tuple[int, int]]  # (corpus, service) of the tasks made fatal: their runs may have drained


def leases_reap(*, max_attempts: int, interrupted: dict[int, tuple[str, str]] | None = None) -> Reaped:
    """Return expired leases to TODO; a task that used all its attempts becomes fatal with the infrastructure
    class `Fatal:infrastructure:<reason>`: no attempt could finish, and the machine, not the document, is why.
    `interrupted` says, for tasks the caller knows the holder of, (worker thread, InfrastructureReason): the
    thread is kept on the task (`last_worker`) so its retry goes elsewhere, and the reason names a fatal;
    any other expired lease is `lease_lost`. The caller closes the drained runs of the pairs it returns in
    its transaction (corpora.pairs.runs_close_drained), as ingestion does."""
    known = interrupted or {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {TASK_TABLE} t
               SET status = CASE WHEN t.attempts >= %(max)s THEN {TaskStatus.FATAL} ELSE {TaskStatus.TODO} END,
                   leased_until = NULL,
                   todo_since = CASE WHEN t.attempts >= %(max)s THEN t.todo_since ELSE now() END,
                   last_worker = coalesce(v.worker, t.last_worker)
              FROM (SELECT id FROM {TASK_TABLE} WHERE {LEASED_SQL} AND leased_until < now()) e
              LEFT JOIN unnest(%(ids)s::bigint[], %(workers)s::text[], %(reasons)s::text[]) AS v(id, worker, reason)
                ON v.id = e.id
             WHERE t.id = e.id AND t.{LEASED_SQL} AND t.leased_until < now()
            RETURNING t.id, t.corpus_id, t.service_id, t.status, t.attempts,
                      coalesce(v.reason, '{InfrastructureReason.LEASE_LOST}'), t.last_worker
            """,
            {"max": max_attempts, "ids": list(known), "workers": [worker for worker, _ in known.values()],
             "reasons": [reason for _, reason in known.values()]},
        )  # fmt: skip
        rows = cursor.fetchall()
        fatal = [row for row in rows if row[3] == TaskStatus.FATAL]
        if fatal:
            messages_delete(cursor, [row[0] for row in fatal])
            messages_write(
                cursor,
                (
                    (task_id, corpus_id, service_id, status,
                     [(Severity.FATAL, Category.INFRASTRUCTURE, reason, _unfinished_details(reason, attempts, worker))])
                    for task_id, corpus_id, service_id, status, attempts, reason, worker in fatal
                ),
            )  # fmt: skip
    if rows:
        logger.info("reaped %d expired leases (%d now fatal: infrastructure)", len(rows), len(fatal))
    return Reaped(len(rows) - len(fatal), len(fatal), {(row[1], row[2]) for row in fatal})


def _unfinished_details(reason: str, attempts: int, worker: str | None) -> str:
    """The details of the infrastructure fatal of a task whose last lease ended without a result."""
    known: dict[str, str] = {
        InfrastructureReason.WORKER_DIED: f"its last worker ({worker}) fell silent",
        InfrastructureReason.LEASE_LOST: "its last lease ran out",
    }
    last = known.get(reason, f"its last attempt ended: {reason}")
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return f"no result came back after {tries}; {last}"[:DETAILS_MAX]


def leases_invalidate(refused: list[tuple[int, str, str]], *, mark: int) -> set[tuple[int, int]]:
    """Make leased tasks whose entry must not be packed invalid at once, not retried, each with a
    Fatal:invalid:<what> message; `refused` holds (task id, what, details). Returns the (corpus, service)
    pairs touched; the caller closes their drained runs in its transaction, as ingestion does."""
    if not refused:
        return set()
    ids = [task_id for task_id, _, _ in refused]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TASK_TABLE} t SET status = {TaskStatus.INVALID}, leased_until = NULL"
            " FROM unnest(%s::bigint[]) AS v(id)"
            " WHERE t.id = v.id AND t.status = %s RETURNING t.id, t.corpus_id, t.service_id",
            [ids, mark],
        )
        rows = cursor.fetchall()
        if not rows:
            return set()
        messages_delete(cursor, [row[0] for row in rows])
        reasons = {task_id: (what, details[:DETAILS_MAX]) for task_id, what, details in refused}
        messages_write(
            cursor,
            (
                (
                    task_id,
                    corpus_id,
                    service_id,
                    TaskStatus.INVALID,
                    [(Severity.FATAL, Category.INVALID, *reasons[task_id])],
                )
                for task_id, corpus_id, service_id in rows
            ),
        )
        pairs = {(corpus_id, service_id) for _, corpus_id, service_id in rows}
    logger.info("made %d task(s) invalid: their entries cannot be packed", len(rows))
    return pairs


# --- results -------------------------------------------------------------------------------------


class TaskResult(Protocol):
    """What a decoded result brings to its task: status, messages, runtime, CPU time and peak memory."""

    @property
    def status(self) -> int: ...
    @property
    def messages(self) -> list[Message]: ...
    @property
    def runtime_ms(self) -> int | None: ...
    @property
    def cpu_ms(self) -> int | None: ...
    @property
    def peak_rss_kb(self) -> int | None: ...


@dataclass(frozen=True)
class Locked:
    """A leased task locked for its result, with what its telemetry needs (corpora.telemetry): its pair's
    open run, when it was leased and since when it waited (TODO since, else the run's start), Unix seconds."""

    corpus_id: int
    service_id: int
    attempts: int
    run_id: int | None
    leased_at: float | None
    waiting_since: float | None


def results_lock(cursor: CursorWrapper, task_ids: list[int]) -> dict[int, Locked]:
    """Lock the leased ones of `task_ids` for applying their results (the open run of their pair is read,
    not locked)."""
    cursor.execute(
        "SELECT t.id, t.corpus_id, t.service_id, t.attempts, r.id,"
        "  date_part('epoch', t.leased_until) - t.lease_seconds,"
        "  date_part('epoch', coalesce(t.todo_since, r.started_at))"
        f" FROM {TASK_TABLE} t"
        f" LEFT JOIN {RUN_TABLE} r ON r.corpus_id = t.corpus_id AND r.service_id = t.service_id"
        " AND r.finished_at IS NULL"
        f" WHERE t.id = ANY(%s) AND t.{LEASED_SQL} FOR UPDATE OF t",
        [task_ids],
    )
    return {row[0]: Locked(*row[1:]) for row in cursor.fetchall()}


def results_retry(cursor: CursorWrapper, retries: Sequence[tuple[int, str]]) -> None:
    """Send tasks locked by `results_lock` back to TODO without applying their result (the machine ended
    them: an infrastructure fatal), each with the worker thread that returned it as its `last_worker`: the
    attempt stays counted, and their previous messages stay as they were."""
    if retries:
        cursor.execute(
            f"UPDATE {TASK_TABLE} t SET status = {TaskStatus.TODO}, leased_until = NULL, todo_since = now(),"
            " last_worker = v.worker FROM unnest(%s::bigint[], %s::text[]) AS v(id, worker) WHERE t.id = v.id",
            [[task_id for task_id, _ in retries], [worker[:200] for _, worker in retries]],
        )


def results_write(cursor: CursorWrapper, rows: Sequence[tuple[int, int, int, TaskResult]]) -> None:
    """Apply results locked by `results_lock`: (task, corpus, service, result) rows replace each task's
    messages and runtime and set its status, in the caller's transaction."""
    ids = [row[0] for row in rows]
    messages_delete(cursor, ids)
    # Joined with the ids so that the plan is an index probe per task whatever the statistics say:
    # `task_id = ANY(...)` on a table analyzed while small becomes a sequential scan per batch.
    cursor.execute(
        f"DELETE FROM {TASK_RUNTIME_TABLE} x USING unnest(%s::bigint[]) AS v(id) WHERE x.task_id = v.id", [ids]
    )
    messages_write(cursor, ((t, c, s, r.status, r.messages) for t, c, s, r in rows))
    runtimes = [(t, c, s, r.runtime_ms, r.cpu_ms, r.peak_rss_kb) for t, c, s, r in rows if r.runtime_ms is not None]
    if runtimes:
        copy_runtimes = (
            f"COPY {TASK_RUNTIME_TABLE} (task_id, corpus_id, service_id, runtime_ms, cpu_ms, peak_rss_kb) FROM STDIN"
        )
        with cursor.cursor.copy(copy_runtimes) as copy:
            for row in runtimes:
                copy.write_row(row)
    # Last: its statement trigger locks the pair's task-count rows until the commit, and the dispatcher's
    # next lease, which counts into the same rows, waits for that lock.
    cursor.execute(
        f"UPDATE {TASK_TABLE} t SET status = v.status, leased_until = NULL"
        " FROM unnest(%s::bigint[], %s::integer[]) AS v(id, status) WHERE t.id = v.id",
        [ids, [row[3].status for row in rows]],
    )


# --- pause, resume, rerun ------------------------------------------------------------------------


def tasks_pause(*, corpus_id: int | None = None, service_id: int | None = None) -> int:
    """Block every task in progress (TODO or leased) of a pair, or of all pairs. Returns how many."""
    return _statuses_update(
        f"SET status = {TaskStatus.BLOCKED}, leased_until = NULL",
        IN_PROGRESS_SQL,
        corpus_id=corpus_id,
        service_id=service_id,
    )


def tasks_resume(*, corpus_id: int | None = None, service_id: int | None = None) -> int:
    """Put every blocked task of a pair, or of all pairs, back to TODO. Returns how many."""
    return _statuses_update(
        f"SET status = {TaskStatus.TODO}, todo_since = now()", BLOCKED_SQL, corpus_id=corpus_id, service_id=service_id
    )


def _statuses_update(assignment: str, condition: str, *, corpus_id: int | None, service_id: int | None) -> int:
    where, params = [condition], []
    if corpus_id is not None:
        where.append("corpus_id = %s AND service_id = %s")
        params += [corpus_id, service_id]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TASK_TABLE} {assignment} WHERE {' AND '.join(where)}", params)
        return int(cursor.rowcount)


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
        # The tasks with such a message: for each class in scope, one range of the (task, class) rows'
        # report index per status, since they carry their task's status (only completed tasks have
        # messages, and their status cannot change under them).
        classes = "c.level = %s AND c.severity = %s AND c.category = %s" + (" AND c.what = %s" if what else "")
        scope = (
            f"SELECT DISTINCT p.task_id AS id FROM {MESSAGE_CLASS_TABLE} c JOIN {TASK_CLASS_TABLE} p"
            " ON p.corpus_id = %s AND p.service_id = %s AND p.task_status = ANY(%s) AND p.message_class_id = c.id"
            f" WHERE {classes} ORDER BY 1"
        )
        params: list[Any] = [corpus_id, service_id, status_list, ClassLevel.CLASS, message_severity, category]
        params += [what] if what else []
    else:
        scope = (
            f"SELECT t.id FROM {TASK_TABLE} t WHERE t.corpus_id = %s AND t.service_id = %s AND t.status = ANY(%s)"
            " ORDER BY 1"
        )
        params = [corpus_id, service_id, status_list]
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        # Only fixed fragments are joined into the scope; every value goes in as a parameter. The scope is
        # in task order, so the probes below walk each index (and, as tasks are written in about that
        # order, each table) forwards.
        # Each task's runtime goes with it into the scope: deleted below, it is where the task is scheduled.
        expected = service_median_ms(cursor, service_id=service_id)
        cursor.execute(
            f"CREATE TEMP TABLE rerun_scope ON COMMIT DROP AS SELECT q.id, r.runtime_ms FROM ({scope}) q"
            f" LEFT JOIN {TASK_RUNTIME_TABLE} r ON r.task_id = q.id ORDER BY q.id",
            params,
        )
        for statement in (*bulk_settings, *PROBE_SETTINGS):
            cursor.execute(statement)
        wal_compress(cursor)
        messages_retire(cursor, scope="rerun_scope")
        cursor.execute(f"DELETE FROM {TASK_RUNTIME_TABLE} r USING rerun_scope s WHERE r.task_id = s.id")
        # The status is checked again: a task another rerun set TODO meanwhile (and a dispatcher leased)
        # keeps its lease.
        cursor.execute(
            f"UPDATE {TASK_TABLE} t SET status = {TaskStatus.TODO}, attempts = 0, leased_until = NULL,"
            " todo_since = NULL, expected_ms = coalesce(s.runtime_ms, %s)"
            " FROM rerun_scope s"
            " WHERE t.id = s.id AND t.status = ANY(%s)",
            [expected, status_list],
        )
        count: int = cursor.rowcount
        cursor.execute("DROP TABLE rerun_scope")
    return count


# --- purge ------------------------ ---------------------------------------------------------------------


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
    tables = [TASK_RUNTIME_TABLE, TASK_TABLE, TASK_COUNT_TABLE]
    if corpus_id is None:
        # Kept per service: gone with the service's last runtime.
        tables[1:1] = [RUNTIME_COUNT_TABLE, RUNTIME_BIN_TABLE]
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        counts["messages"] = messages_purge(cursor, scope, params)
        for table in tables:
            cursor.execute(f"DELETE FROM {table} WHERE {scope}", params)
            if table == TASK_TABLE:
                counts["tasks"] = cursor.rowcount
        grains_purge(cursor, scope, params)
    return counts


# --- sandbox corpora -----------------------------------------------------------------------------


def sandbox_tasks_create(cursor: CursorWrapper, *, corpus_id: int, import_service_id: int) -> int:
    """One import task per document of a freshly carved sandbox, no_problem as a valid import's: every
    document was taken from a valid document of its parent. Returns how many were created."""
    cursor.execute(
        f"INSERT INTO {TASK_TABLE} (corpus_id, service_id, document_id, status)"
        f" SELECT d.corpus_id, %s, d.id, {TaskStatus.NO_PROBLEM} FROM {DOCUMENT_TABLE} d WHERE d.corpus_id = %s",
        [import_service_id, corpus_id],
    )
    return int(cursor.rowcount)
