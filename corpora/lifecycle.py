"""The task lifecycle: every set-based statement that changes tasks and their log messages.

Task creation (import, extend, activation), lease, release, reap, invalidation of refused entries,
applying results, pause, resume, rerun and purge live here, beside the Task model, with the one
message writer (`messages_write`) and deleter (`messages_delete`), which keep a task's row of messages,
its (task, class) rows and the tallies together (docs/decisions.md, "Message storage at arXiv's
scale"). The dispatcher keeps sockets, processes and batching; corpora, services and reports keep
validation, jobs and journaling; all of them call this module. Statuses come from `corpora.statuses`;
none is spelled here as a number.

The statements are tuned (index probes, statement order for locks, WAL compression of the rerun;
docs/decisions.md, "Task lifecycle", "Dispatcher and workers" and "Reports"): change them with a benchmark.
"""

# ruff: noqa: S608  (every statement here is built of fixed text and vocabulary constants; values are parameters)
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from conversion.choices import Category, Severity, TaskStatus
from conversion.logparse import DETAILS_MAX, Message
from corpora.statuses import BLOCKED_SQL, IN_PROGRESS_SQL, LEASED_SQL
from corpora.telemetry import LEASE_WAITS_CTE

logger = logging.getLogger(__name__)

NEVER_COMPLETED = (Severity.FATAL, "cortex", "never_completed_with_retries")

# --- creation ------------------------------------------------------------------------------------


def import_tasks_create(cursor: CursorWrapper, *, corpus_id: int, import_service_id: int) -> None:
    """One import task per row of the import's `import_entries` table (no_problem, or invalid when the
    entry has a problem) and a Fatal:invalid message for each invalid one."""
    cursor.execute(
        "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
        f" SELECT %s, %s, document_id,"
        f" CASE WHEN problem = '' THEN {TaskStatus.NO_PROBLEM} ELSE {TaskStatus.INVALID} END"
        " FROM import_entries",
        [corpus_id, import_service_id],
    )
    cursor.execute(
        "SELECT t.id, t.corpus_id, t.service_id, t.status, e.problem, e.detail"
        " FROM import_entries e JOIN corpora_task t ON t.document_id = e.document_id AND t.service_id = %s"
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
    cursor.execute(
        "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
        f" SELECT a.corpus_id, a.service_id, e.document_id, {TaskStatus.TODO}"
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
            f" SELECT i.corpus_id, %s, i.document_id, {TaskStatus.TODO} FROM corpora_task i"
            f" WHERE i.corpus_id = %s AND i.service_id = %s AND i.status <> {TaskStatus.INVALID}"
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
    The lease length is captured on each task now, so a later override changes only later leases; the
    same statement counts the tasks' queue waits into their open runs' telemetry (corpora.telemetry)."""
    if limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH picked AS (
                SELECT id, todo_since FROM corpora_task
                 WHERE service_id = %(service)s AND status = {TaskStatus.TODO}
                 ORDER BY id LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED
            ), leased AS (
                UPDATE corpora_task t
                   SET status = %(mark)s, attempts = t.attempts + 1, lease_seconds = %(lease)s,
                       leased_until = now() + make_interval(secs => %(lease)s)
                  FROM picked, corpora_document d, corpora_corpus c
                 WHERE t.id = picked.id AND d.id = t.document_id AND c.id = t.corpus_id
                RETURNING t.id, t.corpus_id, t.service_id, c.path, d.kind, d.entry, picked.todo_since
            ),{LEASE_WAITS_CTE}
            SELECT id, corpus_id, service_id, path, kind, entry FROM leased
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
            f"UPDATE corpora_task SET status = {TaskStatus.TODO}, leased_until = NULL,"
            " attempts = GREATEST(attempts - 1, 0)"
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
            f"UPDATE corpora_task SET lease_seconds = lease_seconds + {gain}::int,"
            f" leased_until = leased_until + make_interval(secs => {gain})"
            f" WHERE id = ANY(%(ids)s) AND {LEASED_SQL} AND lease_seconds IS NOT NULL"
            " AND leased_until < now() + make_interval(secs => %(within)s)",
            {"ids": task_ids, "within": within_seconds},
        )
        return cursor.rowcount


def leases_expire_unclaimed(*, mark: int, claimed: list[int]) -> int:
    """End now the leases an earlier dispatcher gave (another mark) that no live worker has claimed since
    this one started (`claimed`: the tasks heartbeats named): their holders died, or the earlier
    dispatcher never sent them. The next reap takes them back, the attempt counted."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE corpora_task SET leased_until = now() - interval '1 second'"
            f" WHERE {LEASED_SQL} AND status <> %s AND id <> ALL(%s) AND leased_until >= now()",
            [mark, claimed],
        )
        return cursor.rowcount


def leases_hold(*, seconds: int) -> int:
    """Keep every running lease for at least `seconds` more (those with less left get twice that): while the
    sink cannot take results, a task whose result waits in a worker must not go back for want of it. Each
    lease grows by what it gains, so its start (leased_until - lease_seconds, which the telemetry reads)
    stays. Leases already ended (a silent worker's) are left to the reaper. Returns how many were lengthened."""
    gain = "ceil(date_part('epoch', now() + make_interval(secs => 2 * %(hold)s) - leased_until))"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE corpora_task SET lease_seconds = lease_seconds + {gain}::int,"
            f" leased_until = leased_until + make_interval(secs => {gain})"
            f" WHERE {LEASED_SQL} AND leased_until >= now()"
            " AND leased_until < now() + make_interval(secs => %(hold)s)",
            {"hold": seconds},
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
               SET status = CASE WHEN attempts >= %s THEN {TaskStatus.FATAL} ELSE {TaskStatus.TODO} END,
                   leased_until = NULL,
                   todo_since = CASE WHEN attempts >= %s THEN todo_since ELSE now() END
             WHERE {LEASED_SQL} AND leased_until < now()
            RETURNING id, corpus_id, service_id, status, attempts
            """,
            [max_attempts, max_attempts],
        )
        rows = cursor.fetchall()
        fatal = [row for row in rows if row[3] == TaskStatus.FATAL]
        if fatal:
            messages_delete(cursor, [row[0] for row in fatal])
            severity, category, what = NEVER_COMPLETED
            messages_write(
                cursor,
                (
                    (task_id, corpus_id, service_id, status,
                     [(severity, category, what, f"no result came back after {attempts} attempts")])
                    for task_id, corpus_id, service_id, status, attempts in fatal
                ),
            )  # fmt: skip
    if rows:
        logger.info("reaped %d expired leases (%d now fatal)", len(rows), len(fatal))
    return Reaped(len(rows) - len(fatal), len(fatal), {(row[1], row[2]) for row in fatal})


def leases_invalidate(refused: list[tuple[int, str, str]], *, mark: int) -> set[tuple[int, int]]:
    """Make leased tasks whose entry must not be packed invalid at once, not retried, each with a
    Fatal:invalid:<what> message; `refused` holds (task id, what, details). Returns the (corpus, service)
    pairs touched; the caller closes their drained runs in its transaction, as ingestion does."""
    if not refused:
        return set()
    ids = [task_id for task_id, _, _ in refused]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE corpora_task t SET status = {TaskStatus.INVALID}, leased_until = NULL"
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
    """What a decoded result brings to its task: status, messages, runtime."""

    @property
    def status(self) -> int: ...
    @property
    def messages(self) -> list[Message]: ...
    @property
    def runtime_ms(self) -> int | None: ...


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
        " FROM corpora_task t"
        " LEFT JOIN runs_run r ON r.corpus_id = t.corpus_id AND r.service_id = t.service_id AND r.finished_at IS NULL"
        f" WHERE t.id = ANY(%s) AND t.{LEASED_SQL} FOR UPDATE OF t",
        [task_ids],
    )
    return {row[0]: Locked(*row[1:]) for row in cursor.fetchall()}


def results_retry(cursor: CursorWrapper, task_ids: list[int]) -> None:
    """Send tasks locked by `results_lock` back to TODO without applying their result (the worker's
    governor stopped them): the attempt stays counted, and their previous messages stay as they were."""
    if task_ids:
        cursor.execute(
            f"UPDATE corpora_task SET status = {TaskStatus.TODO}, leased_until = NULL, todo_since = now()"
            " WHERE id = ANY(%s)",
            [task_ids],
        )


def results_write(cursor: CursorWrapper, rows: Sequence[tuple[int, int, int, TaskResult]]) -> None:
    """Apply results locked by `results_lock`: (task, corpus, service, result) rows replace each task's
    messages and runtime and set its status, in the caller's transaction."""
    ids = [row[0] for row in rows]
    messages_delete(cursor, ids)
    # Joined with the ids so that the plan is an index probe per task whatever the statistics say:
    # `task_id = ANY(...)` on a table analyzed while small becomes a sequential scan per batch.
    cursor.execute(
        "DELETE FROM reports_taskruntime x USING unnest(%s::bigint[]) AS v(id) WHERE x.task_id = v.id", [ids]
    )
    messages_write(cursor, ((t, c, s, r.status, r.messages) for t, c, s, r in rows))
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


# --- messages ------------------------------------------------------------------------------------

# What every writer gives the message writer for one task: (task, corpus, service, task status, its
# messages in log order as (severity, category, what, details)).
TaskMessagesIn = tuple[int, int, int, int, Sequence[tuple[str, str, str, str]]]
# A class or rollup of the dictionary: (level, severity, category, what); see reports.MessageClass.
ClassKey = tuple[int, str, str, str]
CLASS, CATEGORY, SEVERITY = 0, 1, 2
_CLASS_OF = itemgetter(0, 1, 2)  # a message's (severity, category, what)
_DETAILS_OF = itemgetter(3)
TASK_ROW_COLUMNS = (
    "task_id, corpus_id, service_id, task_status, classes, counts, rollups, rollup_counts, sequence, details"
)


def messages_write(cursor: CursorWrapper, tasks: Iterable[TaskMessagesIn]) -> int:
    """The message writer: each task's messages become its task row (classes, counts, log order, details),
    a (task, class) row per distinct class, and additions to the pair's tallies, in the caller's
    transaction. The (task, class) rows carry the task's document, read here. A task's row carries its
    final status, so write it with or after that status; a task must have no messages yet
    (messages_delete first). Fields must fit the dictionary's columns (the log parser caps them).
    Returns how many messages were written.

    The arrays go into COPY as array literals made here: psycopg's own list adapter, pure Python, took
    half a millisecond a task of 150 messages, more than the rest of the ingestion (bench/README.md)."""
    rows: list[tuple[Any, ...]] = []
    wanted: dict[ClassKey, None] = {}
    written = 0
    for task_id, corpus_id, service_id, status, messages in tasks:
        if not messages:
            continue
        # A class's place is its order of first appearance, counted from 1. (map and dict.fromkeys keep the
        # per-message work in C: the sink writes hundreds of tasks of 150 messages a second.)
        keys = list(map(_CLASS_OF, messages))
        place = {key: index for index, key in enumerate(dict.fromkeys(keys), 1)}
        sequence = list(map(place.__getitem__, keys))
        counted = Counter(sequence)
        counts = [counted[index] for index in range(1, len(place) + 1)]
        rollups: dict[ClassKey, int] = {}
        for (severity, category, _), count in zip(place, counts, strict=True):
            for key in ((CATEGORY, severity, category, ""), (SEVERITY, severity, "", "")):
                rollups[key] = rollups.get(key, 0) + count
        classes = [(CLASS, *key) for key in place]
        wanted.update(dict.fromkeys(classes))
        wanted.update(dict.fromkeys(rollups))
        details = _text_array(list(map(_DETAILS_OF, messages)))
        rows.append((task_id, corpus_id, service_id, status, classes, counts, rollups, sequence, details))
        written += len(sequence)
    if not rows:
        return 0
    ids = message_classes(cursor, list(wanted))
    cursor.execute("SELECT id, document_id FROM corpora_task WHERE id = ANY(%s)", [[row[0] for row in rows]])
    documents = dict(cursor.fetchall())
    tallies: dict[tuple[int, int, int, int], list[int]] = {}
    pairs: list[str] = []
    with cursor.cursor.copy(f"COPY reports_taskmessages ({TASK_ROW_COLUMNS}) FROM STDIN") as copy:
        for task_id, corpus_id, service_id, status, classes, counts, rollups, sequence, details in rows:
            class_ids = [ids[key] for key in classes]
            rollup_ids = [ids[key] for key in rollups]
            rollup_counts = list(rollups.values())
            copy.write_row((
                task_id, corpus_id, service_id, status, _int_array(class_ids), _int_array(counts),
                _int_array(rollup_ids), _int_array(rollup_counts), _int_array(sequence), details,
            ))  # fmt: skip
            for class_id, count in zip(class_ids + rollup_ids, counts + rollup_counts, strict=True):
                tally = tallies.setdefault((corpus_id, service_id, status, class_id), [0, 0])
                tally[0] += 1
                tally[1] += count
            document = documents[task_id]
            pairs += [
                f"{task_id}\t{corpus_id}\t{service_id}\t{class_id}\t{status}\t{document}\n" for class_id in class_ids
            ]
    with cursor.cursor.copy(
        "COPY reports_taskclass (task_id, corpus_id, service_id, message_class_id, task_status, document_id) FROM STDIN"
    ) as copy:
        copy.write("".join(pairs))  # integers only: nothing to escape
    _tallies_add(cursor, tallies, sign=1)
    return written


def _int_array(values: list[int]) -> str:
    """A PostgreSQL array literal of integers."""
    return "{" + ",".join(map(str, values)) + "}"


def _text_array(values: list[str]) -> str:
    """A PostgreSQL array literal of texts: every element quoted, its backslashes and quotes escaped
    (COPY's own escaping of the whole literal is psycopg's). The values are escaped together, joined by
    NUL, which no text PostgreSQL stores can hold; a value that holds one anyway is escaped alone."""
    if not values:
        return "{}"
    joined = "\x00".join(values)
    if joined.count("\x00") != len(values) - 1:
        return "{" + ",".join('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values) + "}"
    if "\\" in joined or '"' in joined:
        joined = joined.replace("\\", "\\\\").replace('"', '\\"')
    return '{"' + joined.replace("\x00", '","') + '"}'


def message_classes(cursor: CursorWrapper, keys: list[ClassKey]) -> dict[ClassKey, int]:
    """The dictionary ids of these classes and rollups, adding those it lacks. The dictionary is append
    only, and only missing keys are offered to the INSERT, so ids are not used up by conflicts; two
    writers adding the same key at once both get the one that commits first."""
    columns = [list(column) for column in zip(*keys, strict=True)]
    wanted = (
        "SELECT DISTINCT * FROM unnest(%s::smallint[], %s::text[], %s::text[], %s::text[])"
        " AS w(level, severity, category, what)"
    )
    match = "c.level = w.level AND c.severity = w.severity AND c.category = w.category AND c.what = w.what"
    cursor.execute(
        "INSERT INTO reports_messageclass (level, severity, category, what)"
        f" SELECT w.level, w.severity, w.category, w.what FROM ({wanted}) w"
        f" WHERE NOT EXISTS (SELECT FROM reports_messageclass c WHERE {match})"
        " ORDER BY 1, 2, 3, 4 ON CONFLICT DO NOTHING",
        columns,
    )
    cursor.execute(
        f"SELECT c.id, c.level, c.severity, c.category, c.what FROM ({wanted}) w"
        f" JOIN reports_messageclass c ON {match}",
        columns,
    )
    return {(level, severity, category, what): class_id for class_id, level, severity, category, what in cursor}


def _tallies_add(cursor: CursorWrapper, tallies: dict[tuple[int, int, int, int], list[int]], *, sign: int) -> None:
    """Add (sign 1) or take away (sign -1) tasks and messages per (corpus, service, status, class). The
    rows are taken in key order, as by every writer, so two writers wait for each other but never
    deadlock."""
    if not tallies:
        return
    keys = sorted(tallies)
    columns = [[key[i] for key in keys] for i in range(4)]
    columns += [[sign * tallies[key][0] for key in keys], [sign * tallies[key][1] for key in keys]]
    values = (
        "SELECT * FROM unnest(%s::integer[], %s::integer[], %s::smallint[], %s::integer[], %s::bigint[],"
        " %s::bigint[]) AS d(corpus_id, service_id, task_status, message_class_id, tasks, messages)"
    )
    if sign > 0:
        cursor.execute(
            "INSERT INTO reports_messagetally (corpus_id, service_id, task_status, message_class_id, tasks, messages)"
            f" {values} ORDER BY 1, 2, 3, 4"
            " ON CONFLICT (corpus_id, service_id, task_status, message_class_id) DO UPDATE"
            " SET tasks = reports_messagetally.tasks + EXCLUDED.tasks,"
            " messages = reports_messagetally.messages + EXCLUDED.messages",
            columns,
        )
        return
    key_match = (
        "t.corpus_id = d.corpus_id AND t.service_id = d.service_id AND t.task_status = d.task_status"
        " AND t.message_class_id = d.message_class_id"
    )
    cursor.execute(
        f"SELECT FROM reports_messagetally t JOIN ({values}) d ON {key_match}"
        " ORDER BY t.corpus_id, t.service_id, t.task_status, t.message_class_id FOR UPDATE OF t",
        columns,
    )
    cursor.execute(
        f"UPDATE reports_messagetally t SET tasks = t.tasks + d.tasks, messages = t.messages + d.messages"
        f" FROM ({values}) d WHERE {key_match}",
        columns,
    )


_GONE_TABLE = (
    "CREATE TEMP TABLE IF NOT EXISTS messages_gone (corpus_id integer, service_id integer,"
    " task_status smallint, classes integer[], counts integer[], messages integer) ON COMMIT DELETE ROWS"
)
# Each row's classes and rollups with their counts, and its message count: what the tallies lose.
_GONE_COLUMNS = (
    "x.corpus_id, x.service_id, x.task_status, x.classes || x.rollups AS classes,"
    " x.counts || x.rollup_counts AS counts, cardinality(x.sequence) AS messages"
)


def _scope(scope: str, task_ids: Sequence[int] | None, alias: str) -> tuple[str, list[Any]]:
    """A USING clause (and its parameters) that keeps the rows of `alias` whose task is in the scope: the
    temporary table `scope` (its column `id`), or the ids given."""
    if scope:
        return f"{scope} s WHERE {alias}.task_id = s.id", []
    return f"unnest(%s::bigint[]) AS s(id) WHERE {alias}.task_id = s.id", [list(task_ids or [])]


def _tallies_take_gone(cursor: CursorWrapper) -> int:
    """Take the rows in messages_gone off the tallies; returns their messages and empties the table."""
    cursor.execute(
        "SELECT g.corpus_id, g.service_id, g.task_status, u.class_id, count(*), sum(u.messages)"
        " FROM messages_gone g, unnest(g.classes, g.counts) AS u(class_id, messages) GROUP BY 1, 2, 3, 4"
    )
    _tallies_add(cursor, {tuple(row[:4]): [row[4], row[5]] for row in cursor.fetchall()}, sign=-1)
    cursor.execute("SELECT coalesce(sum(messages), 0) FROM messages_gone")
    taken = int(cursor.fetchone()[0])
    cursor.execute("TRUNCATE messages_gone")
    return taken


def messages_delete(cursor: CursorWrapper, task_ids: Sequence[int] | None = None, *, scope: str = "") -> int:
    """Delete the messages of tasks (`task_ids`, or the ids in the column `id` of the temporary table
    named by `scope`): their task rows, their (task, class) rows, and their share of the tallies, in the
    caller's transaction. Retired messages (messages_retire) go too, without touching the tallies, which
    no longer count them. Returns how many messages were deleted that the tallies still counted."""
    if not scope and not task_ids:
        return 0
    cursor.execute(_GONE_TABLE)
    retired, retired_params = _scope(scope, task_ids, "z")
    using, params = _scope(scope, task_ids, "x")
    cursor.execute(
        f"WITH retired AS (DELETE FROM reports_stalemessages z USING {retired} RETURNING z.task_id),"
        f" gone AS (DELETE FROM reports_taskmessages x USING {using} RETURNING x.task_id, {_GONE_COLUMNS},"
        " x.task_id IN (SELECT task_id FROM retired) AS retired),"
        " pairs AS (DELETE FROM reports_taskclass p WHERE p.task_id = ANY(ARRAY(SELECT task_id FROM gone)))"
        " INSERT INTO messages_gone SELECT corpus_id, service_id, task_status, classes, counts, messages"
        " FROM gone WHERE NOT retired",
        [*retired_params, *params],
    )
    return _tallies_take_gone(cursor) if cursor.rowcount else 0


def messages_retire(cursor: CursorWrapper, *, scope: str) -> int:
    """Retire the messages of the tasks in the temporary table `scope` (column `id`), in the caller's
    transaction, which must set those tasks in progress: the tallies stop counting them and the reports
    stop showing them at once, while their rows stay until messages_purge_retired deletes them (or
    messages_delete, when a task's next result comes). A rerun of 100,000 tasks spread over millions
    would otherwise change a page of every table for each of them before it returns (docs/decisions.md,
    "Reports", rerun). Returns how many messages were retired."""
    cursor.execute(_GONE_TABLE)
    cursor.execute(
        "WITH retired AS (INSERT INTO reports_stalemessages (task_id, corpus_id, service_id)"
        f" SELECT x.task_id, x.corpus_id, x.service_id FROM {scope} s JOIN reports_taskmessages x"
        " ON x.task_id = s.id ON CONFLICT DO NOTHING RETURNING task_id)"
        f" INSERT INTO messages_gone SELECT {_GONE_COLUMNS} FROM retired r JOIN reports_taskmessages x"
        " ON x.task_id = r.task_id"
    )
    return _tallies_take_gone(cursor) if cursor.rowcount else 0


def messages_purge_retired(*, batch: int = 5_000) -> int:
    """Delete the rows of one batch of retired messages (task rows, (task, class) rows) in a transaction of
    its own; returns how many tasks' messages went (0: none are left). A batch whose rows the message
    deleter holds is skipped, to be taken by it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE purge_batch ON COMMIT DROP AS SELECT task_id AS id FROM reports_stalemessages"
            " ORDER BY task_id LIMIT %s FOR UPDATE SKIP LOCKED",
            [batch],
        )
        count = cursor.rowcount
        if count:
            for statement in _RERUN_SETTINGS:  # probe each table's task index, as the rerun does
                cursor.execute(statement)
            wal_compress(cursor)
            cursor.execute("DELETE FROM reports_taskmessages x USING purge_batch s WHERE x.task_id = s.id")
            cursor.execute("DELETE FROM reports_taskclass p USING purge_batch s WHERE p.task_id = s.id")
            cursor.execute("DELETE FROM reports_stalemessages z USING purge_batch s WHERE z.task_id = s.id")
        cursor.execute("DROP TABLE purge_batch")
    return count


def messages_vacuum() -> bool:
    """VACUUM the message tables after a purge, so that index-only scans of the (task, class) rows (a
    snapshot's members, a sandbox carve) stop visiting the heap pages the purge changed: right after a
    purge a snapshot took several times as long (bench/README.md, "arXiv's volume"). Autovacuum would
    wait for a fifth of the table to be dead. Not run inside a caller's transaction, where the deleted
    rows are not yet gone for VACUUM (nor may VACUUM run there); returns whether it ran."""
    if connection.in_atomic_block:
        return False
    with connection.cursor() as cursor:
        cursor.execute("VACUUM reports_taskclass, reports_taskmessages, reports_stalemessages")
    return True


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
        cursor.execute(f"UPDATE corpora_task {assignment} WHERE {' AND '.join(where)}", params)
        return cursor.rowcount


# The rerun's joins probe each table's task key once per task in scope instead of hashing the scope
# against a scan of the whole table, which the planner chose on the message rows of 1M tasks. Measured
# on 1M tasks (bench/README.md), after a CHECKPOINT: for 100,000 tasks the runtime DELETE took 0.7-1.0 s
# instead of 0.9 s, the UPDATE 1.5-1.8 s instead of 1.7-2.1 s, and the row-per-message DELETE of that
# time 3.2 s instead of 4.6-4.7 s; for 600,000 tasks both ways took the same.
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
        # The tasks with such a message: for each class in scope, one range of the (task, class) rows'
        # report index per status, since they carry their task's status (only completed tasks have
        # messages, and their status cannot change under them).
        classes = "c.level = %s AND c.severity = %s AND c.category = %s" + (" AND c.what = %s" if what else "")
        scope = (
            "SELECT DISTINCT p.task_id AS id FROM reports_messageclass c JOIN reports_taskclass p"
            " ON p.corpus_id = %s AND p.service_id = %s AND p.task_status = ANY(%s) AND p.message_class_id = c.id"
            f" WHERE {classes} ORDER BY 1"
        )
        params: list[Any] = [corpus_id, service_id, status_list, CLASS, message_severity, category]
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
        messages_retire(cursor, scope="rerun_scope")
        cursor.execute("DELETE FROM reports_taskruntime r USING rerun_scope s WHERE r.task_id = s.id")
        # The status is checked again: a task another rerun set TODO meanwhile (and a dispatcher leased)
        # keeps its lease.
        cursor.execute(
            f"UPDATE corpora_task t SET status = {TaskStatus.TODO}, attempts = 0, leased_until = NULL,"
            " todo_since = NULL"
            " FROM rerun_scope s"
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
        # Kept per service: gone with the service's last runtime.
        tables[1:1] = ["reports_runtimecount", "reports_runtimebin"]
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        # Every row of the scope goes, tallies included, so no tally needs to be taken apart.
        cursor.execute(
            f"WITH gone AS (DELETE FROM reports_taskmessages x WHERE {scope} RETURNING cardinality(x.sequence) AS n,"
            " EXISTS (SELECT FROM reports_stalemessages z WHERE z.task_id = x.task_id) AS retired)"
            " SELECT coalesce(sum(n) FILTER (WHERE NOT retired), 0) FROM gone",
            params,
        )
        counts["messages"] = int(cursor.fetchone()[0])
        for table in ("reports_taskclass", "reports_messagetally", "reports_stalemessages"):
            cursor.execute(f"DELETE FROM {table} WHERE {scope}", params)
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
        f" SELECT d.corpus_id, %s, d.id, {TaskStatus.NO_PROBLEM} FROM corpora_document d WHERE d.corpus_id = %s",
        [import_service_id, corpus_id],
    )
    return cursor.rowcount
