"""The message store: every statement that writes the tasks' log messages and what is kept of them.

One writer (`messages_write`) and one deleter (`messages_delete`) keep a task's row of messages, its
(task, class) rows, its package rows and the pair's message and package tallies together
(docs/decisions/message-storage.md, package-attribution.md); `message_classes` and `package_usages` add
to the dictionaries; a rerun retires messages (`messages_retire`) and
`messages_purge_retired` deletes their rows later, in batches, after which `messages_vacuum` lets the
index-only scans skip the heap again; `messages_purge` deletes every message of a corpus, a service or a
pair. The task status changes (corpora.task_changes) call these in their transactions.

The statements are tuned (docs/decisions/message-storage.md and rerun.md): change them with a benchmark.
"""

# ruff: noqa: S608  (every statement here is built of fixed text and table names of corpora.models; values are parameters)
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from conversion.attribution import attribute
from corpora.choices import ClassLevel
from corpora.tables import (
    MESSAGE_CLASS_TABLE,
    MESSAGE_TALLY_TABLE,
    PACKAGE_TALLY_TABLE,
    PACKAGE_USAGE_TABLE,
    STALE_MESSAGES_TABLE,
    TASK_CLASS_TABLE,
    TASK_MESSAGES_TABLE,
    TASK_PACKAGE_TABLE,
    TASK_TABLE,
)

logger = logging.getLogger(__name__)


# What every writer gives the message writer for one task: (task, corpus, service, task status, its
# messages in log order as (severity, category, what, details)).
TaskMessagesIn = tuple[int, int, int, int, Sequence[tuple[str, str, str, str]]]
# A class or rollup of the dictionary: (level, severity, category, what); see MessageClass.
ClassKey = tuple[int, str, str, str]
# A package usage of the dictionary: (kind, package, flags); see PackageUsage.
UsageKey = tuple[str, str, int]
_CLASS_OF = itemgetter(0, 1, 2)  # a message's (severity, category, what)
_DETAILS_OF = itemgetter(3)
TASK_ROW_COLUMNS = (
    "task_id, corpus_id, service_id, task_status, classes, counts, rollups, rollup_counts, sequence, details, packages"
)


def messages_write(cursor: CursorWrapper, tasks: Iterable[TaskMessagesIn]) -> int:
    """The message writer: each task's messages become its task row (classes, counts, log order, details),
    a (task, class) row per distinct class, and additions to the pair's tallies, in the caller's
    transaction. The (task, class) rows carry the task's document, read here. A task's row carries its
    final status, so write it with or after that status; a task must have no messages yet
    (messages_delete first). Fields must fit the dictionary's columns (the log parser caps them). The
    packages and classes the messages name (conversion.attribution) become the task's package rows, its
    row's package usages and additions to the pair's package tallies. Returns how many messages were
    written.

    The arrays go into COPY as array literals made here: psycopg's own list adapter, pure Python, took
    half a millisecond a task of 150 messages, more than the rest of the ingestion (bench/README.md)."""
    rows: list[tuple[Any, ...]] = []
    wanted: dict[ClassKey, None] = {}
    usages_wanted: dict[UsageKey, None] = {}
    written = 0
    for task_id, corpus_id, service_id, status, messages in tasks:
        if not messages:
            continue
        uses = attribute(messages, status)
        usages_wanted.update(dict.fromkeys((use.kind, use.name, use.flags) for use in uses))
        # A class's place is its order of first appearance, counted from 1. (map and dict.fromkeys keep the
        # per-message work in C: the sink writes hundreds of tasks of 150 messages a second.)
        keys = list(map(_CLASS_OF, messages))
        place = {key: index for index, key in enumerate(dict.fromkeys(keys), 1)}
        sequence = list(map(place.__getitem__, keys))
        counted = Counter(sequence)
        counts = [counted[index] for index in range(1, len(place) + 1)]
        rollups: dict[ClassKey, int] = {}
        for (severity, category, _), count in zip(place, counts, strict=True):
            for key in ((ClassLevel.CATEGORY, severity, category, ""), (ClassLevel.SEVERITY, severity, "", "")):
                rollups[key] = rollups.get(key, 0) + count
        classes = [(ClassLevel.CLASS, *key) for key in place]
        wanted.update(dict.fromkeys(classes))
        wanted.update(dict.fromkeys(rollups))
        details = _text_array(list(map(_DETAILS_OF, messages)))
        rows.append((task_id, corpus_id, service_id, status, classes, counts, rollups, sequence, details, uses))
        written += len(sequence)
    if not rows:
        return 0
    ids = message_classes(cursor, list(wanted))
    usage_ids = package_usages(cursor, list(usages_wanted)) if usages_wanted else {}
    cursor.execute(f"SELECT id, document_id FROM {TASK_TABLE} WHERE id = ANY(%s)", [[row[0] for row in rows]])
    documents = dict(cursor.fetchall())
    tallies: dict[tuple[int, ...], list[int]] = {}
    package_tallies: dict[tuple[int, ...], list[int]] = {}
    pairs: list[str] = []
    packages: list[str] = []
    with cursor.cursor.copy(f"COPY {TASK_MESSAGES_TABLE} ({TASK_ROW_COLUMNS}) FROM STDIN") as copy:
        for task_id, corpus_id, service_id, status, classes, counts, rollups, sequence, details, uses in rows:
            class_ids = [ids[key] for key in classes]
            rollup_ids = [ids[key] for key in rollups]
            rollup_counts = list(rollups.values())
            used = [usage_ids[use.kind, use.name, use.flags] for use in uses]
            copy.write_row((
                task_id, corpus_id, service_id, status, _int_array(class_ids), _int_array(counts),
                _int_array(rollup_ids), _int_array(rollup_counts), _int_array(sequence), details, _int_array(used),
            ))  # fmt: skip
            for class_id, count in zip(class_ids + rollup_ids, counts + rollup_counts, strict=True):
                tally = tallies.setdefault((corpus_id, service_id, status, class_id), [0, 0])
                tally[0] += 1
                tally[1] += count
            for usage_id in used:
                package_tallies.setdefault((corpus_id, service_id, status, usage_id), [0])[0] += 1
            document = documents[task_id]
            pairs += [
                f"{task_id}\t{corpus_id}\t{service_id}\t{class_id}\t{status}\t{document}\n" for class_id in class_ids
            ]
            head = f"{task_id}\t{document}\t{corpus_id}\t{service_id}\t{status}\t"
            packages += [f"{head}{use.kind}\t{_copy_text(use.name)}\t{use.flags}\t{use.errors}\n" for use in uses]
    with cursor.cursor.copy(
        f"COPY {TASK_CLASS_TABLE} (task_id, corpus_id, service_id, message_class_id, task_status, document_id)"
        " FROM STDIN"
    ) as copy:
        copy.write("".join(pairs))  # integers only: nothing to escape
    _tallies_add(cursor, MESSAGE_TALLY, tallies, sign=1)
    if packages:
        with cursor.cursor.copy(
            f"COPY {TASK_PACKAGE_TABLE} (task_id, document_id, corpus_id, service_id, task_status, kind, package,"
            " flags, errors) FROM STDIN"
        ) as copy:
            copy.write("".join(packages))
        _tallies_add(cursor, PACKAGE_TALLY, package_tallies, sign=1)
    return written


def _copy_text(value: str) -> str:
    """A value in COPY's text format: backslash, tab and line ends escaped."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


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
        f"INSERT INTO {MESSAGE_CLASS_TABLE} (level, severity, category, what)"
        f" SELECT w.level, w.severity, w.category, w.what FROM ({wanted}) w"
        f" WHERE NOT EXISTS (SELECT FROM {MESSAGE_CLASS_TABLE} c WHERE {match})"
        " ORDER BY 1, 2, 3, 4 ON CONFLICT DO NOTHING",
        columns,
    )
    cursor.execute(
        f"SELECT c.id, c.level, c.severity, c.category, c.what FROM ({wanted}) w"
        f" JOIN {MESSAGE_CLASS_TABLE} c ON {match}",
        columns,
    )
    return {(level, severity, category, what): class_id for class_id, level, severity, category, what in cursor}


def package_usages(cursor: CursorWrapper, keys: list[UsageKey]) -> dict[UsageKey, int]:
    """The dictionary ids of these package usages, adding those it lacks, as message_classes does."""
    columns = [list(column) for column in zip(*keys, strict=True)]
    wanted = "SELECT DISTINCT * FROM unnest(%s::text[], %s::text[], %s::smallint[]) AS w(kind, package, flags)"
    match = "u.kind = w.kind AND u.package = w.package AND u.flags = w.flags"
    cursor.execute(
        f"INSERT INTO {PACKAGE_USAGE_TABLE} (kind, package, flags)"
        f" SELECT w.kind, w.package, w.flags FROM ({wanted}) w"
        f" WHERE NOT EXISTS (SELECT FROM {PACKAGE_USAGE_TABLE} u WHERE {match})"
        " ORDER BY 1, 2, 3 ON CONFLICT DO NOTHING",
        columns,
    )
    cursor.execute(
        f"SELECT u.id, u.kind, u.package, u.flags FROM ({wanted}) w JOIN {PACKAGE_USAGE_TABLE} u ON {match}", columns
    )
    return {(kind, package, flags): usage_id for usage_id, kind, package, flags in cursor}


@dataclass(frozen=True)
class _Tally:
    """A tally table: its key, (corpus, service, status, dictionary id), and its bigint counts."""

    table: str
    key: str  # the dictionary id's column
    counts: tuple[str, ...]


MESSAGE_TALLY = _Tally(MESSAGE_TALLY_TABLE, "message_class_id", ("tasks", "messages"))
PACKAGE_TALLY = _Tally(PACKAGE_TALLY_TABLE, "package_usage_id", ("tasks",))


def _tallies_add(cursor: CursorWrapper, of: _Tally, tallies: dict[tuple[int, ...], list[int]], *, sign: int) -> None:
    """Add (sign 1) or take away (sign -1) counts per (corpus, service, status, class or usage). The rows
    are taken in key order, as by every writer, so two writers wait for each other but never deadlock."""
    if not tallies:
        return
    keys = sorted(tallies)
    columns = [[key[i] for key in keys] for i in range(4)]
    columns += [[sign * tallies[key][i] for key in keys] for i in range(len(of.counts))]
    names = ("corpus_id", "service_id", "task_status", of.key, *of.counts)
    types = ("integer", "integer", "smallint", "integer", *("bigint" for _ in of.counts))
    values = f"SELECT * FROM unnest({', '.join(f'%s::{kind}[]' for kind in types)}) AS d({', '.join(names)})"
    if sign > 0:
        added = ", ".join(f"{count} = {of.table}.{count} + EXCLUDED.{count}" for count in of.counts)
        cursor.execute(
            f"INSERT INTO {of.table} ({', '.join(names)}) {values} ORDER BY 1, 2, 3, 4"
            f" ON CONFLICT (corpus_id, service_id, task_status, {of.key}) DO UPDATE SET {added}",
            columns,
        )
        return
    key_match = (
        "t.corpus_id = d.corpus_id AND t.service_id = d.service_id AND t.task_status = d.task_status"
        f" AND t.{of.key} = d.{of.key}"
    )
    cursor.execute(
        f"SELECT FROM {of.table} t JOIN ({values}) d ON {key_match}"
        f" ORDER BY t.corpus_id, t.service_id, t.task_status, t.{of.key} FOR UPDATE OF t",
        columns,
    )
    added = ", ".join(f"{count} = t.{count} + d.{count}" for count in of.counts)
    cursor.execute(f"UPDATE {of.table} t SET {added} FROM ({values}) d WHERE {key_match}", columns)


_GONE_TABLE = (
    "CREATE TEMP TABLE IF NOT EXISTS messages_gone (corpus_id integer, service_id integer,"
    " task_status smallint, classes integer[], counts integer[], messages integer, packages integer[])"
    " ON COMMIT DELETE ROWS"
)
# Each row's classes and rollups with their counts and its message count: what the message tallies lose.
# (The package usages, what the package tallies lose, are each statement's own.)
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
    """Take the rows in messages_gone off the message and package tallies; returns their messages and
    empties the table."""
    cursor.execute(
        "SELECT g.corpus_id, g.service_id, g.task_status, u.class_id, count(*), sum(u.messages)"
        " FROM messages_gone g, unnest(g.classes, g.counts) AS u(class_id, messages) GROUP BY 1, 2, 3, 4"
    )
    _tallies_add(cursor, MESSAGE_TALLY, {tuple(row[:4]): [row[4], row[5]] for row in cursor.fetchall()}, sign=-1)
    cursor.execute(
        "SELECT g.corpus_id, g.service_id, g.task_status, u.usage_id, count(*)"
        " FROM messages_gone g, unnest(g.packages) AS u(usage_id) GROUP BY 1, 2, 3, 4"
    )
    _tallies_add(cursor, PACKAGE_TALLY, {tuple(row[:4]): [row[4]] for row in cursor.fetchall()}, sign=-1)
    cursor.execute("SELECT coalesce(sum(messages), 0) FROM messages_gone")
    taken = int(cursor.fetchone()[0])
    cursor.execute("TRUNCATE messages_gone")
    return taken


def messages_delete(cursor: CursorWrapper, task_ids: Sequence[int] | None = None, *, scope: str = "") -> int:
    """Delete the messages of tasks (`task_ids`, or the ids in the column `id` of the temporary table
    named by `scope`): their task rows, their (task, class) rows, their package rows and their share of
    the message and package tallies, in the caller's transaction. Retired messages (messages_retire) go
    too, without touching the message tallies, which no longer count them; the package tallies still do.
    Returns how many messages were deleted that the message tallies still counted."""
    if not scope and not task_ids:
        return 0
    cursor.execute(_GONE_TABLE)
    retired, retired_params = _scope(scope, task_ids, "z")
    using, params = _scope(scope, task_ids, "x")
    cursor.execute(
        f"WITH retired AS (DELETE FROM {STALE_MESSAGES_TABLE} z USING {retired} RETURNING z.task_id),"
        f" gone AS (DELETE FROM {TASK_MESSAGES_TABLE} x USING {using} RETURNING x.task_id, {_GONE_COLUMNS},"
        " x.packages, x.task_id IN (SELECT task_id FROM retired) AS retired),"
        f" pairs AS (DELETE FROM {TASK_CLASS_TABLE} p WHERE p.task_id = ANY(ARRAY(SELECT task_id FROM gone))),"
        f" packages AS (DELETE FROM {TASK_PACKAGE_TABLE} k WHERE k.task_id = ANY(ARRAY(SELECT task_id FROM gone)))"
        " INSERT INTO messages_gone SELECT corpus_id, service_id, task_status,"
        " CASE WHEN retired THEN '{}' ELSE classes END, CASE WHEN retired THEN '{}' ELSE counts END,"
        " CASE WHEN NOT retired THEN messages END, packages FROM gone",
        [*retired_params, *params],
    )
    return _tallies_take_gone(cursor) if cursor.rowcount else 0


def messages_retire(cursor: CursorWrapper, *, scope: str) -> int:
    """Retire the messages of the tasks in the temporary table `scope` (column `id`), in the caller's
    transaction, which must set those tasks in progress: the message tallies stop counting them and the
    reports stop showing them at once, while their rows stay until messages_purge_retired deletes them (or
    messages_delete, when a task's next result comes). A rerun of 100,000 tasks spread over millions
    would otherwise change a page of every table for each of them before it returns
    (docs/decisions/rerun.md). The package tallies keep counting them until then, and their readers take
    them off meanwhile (corpora.queries.corpora.package_tallies_sql): their 4.6 million usages would cost the rerun
    seconds (docs/decisions/package-attribution.md). Returns how many messages were retired."""
    cursor.execute(_GONE_TABLE)
    cursor.execute(
        f"WITH retired AS (INSERT INTO {STALE_MESSAGES_TABLE} (task_id, corpus_id, service_id)"
        f" SELECT x.task_id, x.corpus_id, x.service_id FROM {scope} s JOIN {TASK_MESSAGES_TABLE} x"
        " ON x.task_id = s.id ON CONFLICT DO NOTHING RETURNING task_id)"
        f" INSERT INTO messages_gone SELECT {_GONE_COLUMNS}, '{{}}' FROM retired r JOIN {TASK_MESSAGES_TABLE} x"
        " ON x.task_id = r.task_id"
    )
    return _tallies_take_gone(cursor) if cursor.rowcount else 0


def messages_purge_retired(*, batch: int = 5_000) -> int:
    """Delete the rows of one batch of retired messages (task rows, (task, class) rows, package rows) in a
    transaction of its own, taking their package usages off the package tallies; returns how many tasks'
    messages went (0: none are left). A batch whose rows the message deleter holds is skipped, to be taken
    by it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE purge_batch ON COMMIT DROP AS SELECT task_id AS id FROM {STALE_MESSAGES_TABLE}"
            " ORDER BY task_id LIMIT %s FOR UPDATE SKIP LOCKED",
            [batch],
        )
        count: int = cursor.rowcount
        if count:
            for statement in PROBE_SETTINGS:  # probe each table's task index, as the rerun does
                cursor.execute(statement)
            wal_compress(cursor)
            cursor.execute(_GONE_TABLE)
            cursor.execute(
                f"WITH gone AS (DELETE FROM {TASK_MESSAGES_TABLE} x USING purge_batch s WHERE x.task_id = s.id"
                "  RETURNING x.corpus_id, x.service_id, x.task_status, x.packages)"
                " INSERT INTO messages_gone SELECT corpus_id, service_id, task_status, '{}', '{}', 0, packages"
                " FROM gone"
            )
            _tallies_take_gone(cursor)
            cursor.execute(f"DELETE FROM {TASK_CLASS_TABLE} p USING purge_batch s WHERE p.task_id = s.id")
            cursor.execute(f"DELETE FROM {TASK_PACKAGE_TABLE} k USING purge_batch s WHERE k.task_id = s.id")
            cursor.execute(f"DELETE FROM {STALE_MESSAGES_TABLE} z USING purge_batch s WHERE z.task_id = s.id")
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
        cursor.execute(f"VACUUM {TASK_CLASS_TABLE}, {TASK_MESSAGES_TABLE}, {STALE_MESSAGES_TABLE}")
    return True


# The rerun's joins probe each table's task key once per task in scope instead of hashing the scope
# against a scan of the whole table, which the planner chose on the message rows of 1M tasks. Measured
# on 1M tasks (bench/README.md), after a CHECKPOINT: for 100,000 tasks the runtime DELETE took 0.7-1.0 s
# instead of 0.9 s, the UPDATE 1.5-1.8 s instead of 1.7-2.1 s, and the row-per-message DELETE of that
# time 3.2 s instead of 4.6-4.7 s; for 600,000 tasks both ways took the same.
PROBE_SETTINGS = ("SET LOCAL enable_hashjoin = off", "SET LOCAL enable_mergejoin = off")


def wal_compress(cursor: CursorWrapper) -> bool:
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


def messages_purge(cursor: CursorWrapper, where: str, params: list[Any]) -> int:
    """Delete every message of the tasks whose corpus and service match `where` (fixed fragments on
    `corpus_id` and `service_id`; the ids are `params`): task rows, (task, class) rows, package rows,
    message and package tallies and retired rows, in the caller's transaction. Every row of the scope
    goes, tallies included, so no tally is taken apart. Returns how many messages went that the tallies
    still counted."""
    cursor.execute(
        f"WITH gone AS (DELETE FROM {TASK_MESSAGES_TABLE}"
        f" x WHERE {where} RETURNING cardinality(x.sequence) AS n,"
        f" EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = x.task_id) AS retired)"
        " SELECT coalesce(sum(n) FILTER (WHERE NOT retired), 0) FROM gone",
        params,
    )
    messages = int(cursor.fetchone()[0])
    for table in (TASK_CLASS_TABLE, TASK_PACKAGE_TABLE, MESSAGE_TALLY_TABLE, PACKAGE_TALLY_TABLE, STALE_MESSAGES_TABLE):
        cursor.execute(f"DELETE FROM {table} WHERE {where}", params)
    return messages
