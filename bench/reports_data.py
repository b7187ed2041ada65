# ruff: noqa: S608  (the SQL here is assembled from this module's own constants, never from input)
"""Generated data for the reports benchmark, built set-based in SQL (a handful of INSERT ... SELECT
statements over generate_series, no row-by-row work) and reused by later runs.

Shape, for `tasks` documents (default 1,000,000; must be a multiple of 2,000 so every count below is
exact): one ready corpus, its documents, one no_problem `import` task each, and one `tex_to_html`
task each whose status follows r = (37 * i) mod 100 of the document's index i:

    r < 30 no_problem (-1), < 65 warning (-2), < 90 error (-3), < 98 fatal (-4), else invalid (-5),
    and 65 <= r < 75 marks the error tasks (exactly tasks / 10) that carry the rerun what-class.

Log messages (10 per task on average, so exactly 10 * tasks):
    info     on every task, 4..8 each (mean 6), the first one always `loaded_file`;
    warning  on warning and error tasks, 2..6 each (mean 4);
    error    on error tasks, 3..7 each (mean 5), the first one of a marked task being
             (undefined, \\bench@hundredk) -- no other task has that what;
    fatal    on fatal and invalid tasks, 2..5 each (mean 3.5).
Each (category, what) is drawn from a Zipf-like law (rank = floor((n + 1) ** u), so P(rank k) ~ 1/k)
over 800 info, 2,000 warning, 2,000 error and 200 fatal whats (5,000) spread over 40 categories.
Every draw is a hash of (task index, message index, seed), so the data are the same on every build
and the messages of any set of tasks can be regenerated exactly (the rerun's restore does that).
A task's messages are in log order info, warning, error, fatal, each severity's in draw order.
Runtimes: one row per tex_to_html task, log-normal around 2.5 s (sigma 1.1), clamped to 20 ms..1 h.

The messages are stored as the message writer (corpora.message_store.messages_write) stores them: the class
dictionary (corpora_messageclass: every drawn (severity, category, what) and its category and severity
rollups), a row per task (corpora_taskmessages: classes in order of first appearance, counts, rollups
and their counts, the log as indexes into the classes, details), a row per (task, class)
(corpora_taskclass) and the tallies per (pair, status, class or rollup) (corpora_messagetally). Each
task row is folded from that task's generated messages in one pass over the frame (a lateral subquery
per task, no per-row Python and no sort of all the messages); the (task, class) rows and the tallies are
then unnested and counted from the task rows, as migration 0010 does. `messages_select` is the same
messages one row each, the definition the stored rows are checked against.

The table bench_reports_frame (index i -> task id, name, generated status) and the functions bench_u
and bench_zipf live only in the benchmark database.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import harness

CORPUS = "bench-reports"
SERVICE = "tex_to_html"
SPECIAL_CATEGORY = "undefined"
SPECIAL_WHAT = "\\bench@hundredk"
TASK_MULTIPLE = 2_000  # 100 status residues x a cycle of 20 blocks (lcm of the count moduli 4 and 5)
MESSAGES_PER_TASK = 10

INFO = (
    800,
    [
        ("loaded_file", "pkg#.sty"),
        ("package", "option#"),
        ("font", "cmr#"),
        ("bibliography", "bibentry#"),
        ("summary", "pass#"),
    ],
)
WARNING = (
    2000,
    [
        ("undefined", "\\cs#"),
        ("missing_file", "style#.sty"),
        ("expected", "\\end{env#}"),
        ("unexpected", "token#"),
        ("malformed", "attribute#"),
        ("deprecated", "\\old#"),
        ("ignore", "option#"),
        ("font", "glyph#"),
        ("pdf", "pdfkey#"),
        ("latex", "message#"),
        ("ambiguous", "symbol#"),
        ("unsupported", "package#"),
        ("math", "parse#"),
        ("image", "figure#.eps"),
        ("xml", "node#"),
    ],
)
ERROR = (
    2000,
    [
        ("undefined", "\\cs#"),
        ("missing_file", "style#.sty"),
        ("expected", "\\end{env#}"),
        ("unexpected", "token#"),
        ("malformed", "ltx:element#"),
        ("misdefined", "\\def#"),
        ("latex", "latex#"),
        ("parse", "math#"),
        ("alignment", "\\halign#"),
        ("token", "char#"),
        ("recursion", "\\loop#"),
        ("internal", "bug#"),
        ("perl", "die#"),
        ("xml", "ltx:node#"),
        ("io", "read#"),
    ],
)
FATAL = (
    200,
    [
        ("timeout", "limit#"),
        ("too_many_errors", "errors#"),
        ("internal", "crash#"),
        ("perl", "die#"),
        ("memory", "oom#"),
    ],
)

FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION bench_u(key bigint, seed bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (hashint8extended(key, seed) & 9007199254740991)::float8 / 9007199254740992.0
$$;
CREATE OR REPLACE FUNCTION bench_zipf(u float8, n int) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT least(greatest(floor(exp(u * ln(n + 1)))::int, 1), n)
$$;
CREATE TABLE IF NOT EXISTS bench_reports_meta (key text PRIMARY KEY, value jsonb NOT NULL);
"""

STATUS_OF_R = "CASE WHEN {r} < 30 THEN -1 WHEN {r} < 65 THEN -2 WHEN {r} < 90 THEN -3 WHEN {r} < 98 THEN -4 ELSE -5 END"

# A task's messages, one severity after the other in log order: (severity, how many the frame row `f` has,
# vocabulary, seed of its draws).
BRANCHES: tuple[tuple[str, str, tuple[int, list[tuple[str, str]]], int], ...] = (
    ("info", "4 + mod(f.j + f.s, 5)", INFO, 101),
    ("warning", "CASE WHEN f.status IN (-2, -3) THEN 2 + mod(3 * f.j + f.s, 5) ELSE 0 END", WARNING, 102),
    ("error", "CASE WHEN f.status = -3 THEN 3 + mod(7 * f.j + f.s, 5) ELSE 0 END", ERROR, 103),
    ("fatal", "CASE WHEN f.status IN (-4, -5) THEN 2 + mod(f.j + f.s, 4) ELSE 0 END", FATAL, 104),
)

# The details of message `m` (k: its place among its task's messages of its severity) of frame row `f`.
DETAILS = (
    "f.name || '.tex; line ' || (1 + (hashint8extended(f.i::bigint * 64 + m.k, 7) & 4095))"
    " || ' col ' || mod(f.i + m.k, 80) || ' - ' || m.category || ' ' || m.what"
    " || ' while digesting the body - In Core::Definition::Expandable'"
)

TASK_ROW_COLUMNS = (
    "task_id, corpus_id, service_id, task_status, classes, counts, rollups, rollup_counts, sequence, details"
)


@dataclass
class Generation:
    """What the data set holds and how long building it took (seconds per step; empty if reused)."""

    tasks: int
    messages: int
    reused: bool
    steps: dict[str, float] = field(default_factory=dict)


def _literal_array(values: list[str]) -> str:
    # Only this module's constants go in here, never input.
    return "(ARRAY[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]::text[])"


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _class_of(vocabulary: tuple[int, list[tuple[str, str]]], rank: str) -> tuple[str, str]:
    """(category, what) SQL of the vocabulary's class of rank `rank` (an SQL expression, 1-based)."""
    _, pairs = vocabulary
    size = len(pairs)
    categories = _literal_array([c for c, _ in pairs])
    templates = _literal_array([t for _, t in pairs])
    return (
        f"{categories}[mod({rank} - 1, {size}) + 1]",
        f"replace({templates}[mod({rank} - 1, {size}) + 1], '#', ({rank})::text)",
    )


def _branch(
    severity: str, count_sql: str, vocabulary: tuple[int, list[tuple[str, str]]], seed: int, offset_sql: str
) -> str:
    """The messages of one severity for the frame row `f`: `count_sql` of them, Zipf-drawn, at log
    positions after `offset_sql` (the messages of the severities before)."""
    whats, pairs = vocabulary
    size = len(pairs)
    u = f"bench_u(f.i::bigint * 64 + k, {seed})"
    rank = f"bench_zipf({u}, {whats})"
    if severity == "info":  # the first info line of every task is a loaded_file
        rank = f"CASE WHEN k = 1 THEN (bench_zipf({u}, {whats // size}) - 1) * {size} + 1 ELSE {rank} END"
    category, what = _class_of(vocabulary, "z.z")
    if severity == "error":
        category = f"CASE WHEN f.special AND k = 1 THEN {_quoted(SPECIAL_CATEGORY)} ELSE {category} END"
        what = f"CASE WHEN f.special AND k = 1 THEN {_quoted(SPECIAL_WHAT)} ELSE {what} END"
    return (
        f"SELECT '{severity}'::text AS severity, k, ({offset_sql}) + k AS position, {category} AS category,"
        f" {what} AS what FROM generate_series(1, {count_sql}) AS k, LATERAL (SELECT {rank} AS z) AS z"
    )


def _branches() -> str:
    """Every message of the frame row `f`: severity, k, position (1-based, in log order), category, what."""
    counts = [count_sql for _, count_sql, _, _ in BRANCHES]
    return " UNION ALL ".join(
        _branch(severity, count_sql, vocabulary, seed, " + ".join(["0", *counts[:index]]))
        for index, (severity, count_sql, vocabulary, seed) in enumerate(BRANCHES)
    )


def messages_select(frame_filter: str) -> str:
    """The messages of the frame rows that `frame_filter` (a JOIN/WHERE fragment) keeps, one row each:
    task_id, status, position, severity, category, what, details. What the old message table held; the
    definition the task rows are checked against (corpora_logmessage, the view, must give the same)."""
    return (
        f"SELECT f.task_id, f.status, m.position, m.severity, m.category, m.what, {DETAILS} AS details"
        f" FROM bench_reports_frame f {frame_filter} CROSS JOIN LATERAL ({_branches()}) AS m"
    )


def classes_sql() -> str:
    """INSERT of every class the vocabularies can draw (and the rollups: level 1 a (severity, category),
    level 2 a severity) that the dictionary lacks, in the writer's order (level, severity, category,
    what). The classes no task drew are deleted again once the tallies are in (CLASSES_UNUSED_SQL)."""
    keys = []
    for severity, _, vocabulary, _ in BRANCHES:
        category, what = _class_of(vocabulary, "z")
        keys.append(
            f"SELECT '{severity}'::text AS severity, {category} AS category, {what} AS what"
            f" FROM generate_series(1, {vocabulary[0]}) AS z"
        )
    keys.append(f"SELECT 'error', {_quoted(SPECIAL_CATEGORY)}, {_quoted(SPECIAL_WHAT)}")
    match = "c.level = w.level AND c.severity = w.severity AND c.category = w.category AND c.what = w.what"
    return (
        "INSERT INTO corpora_messageclass (level, severity, category, what)"
        " SELECT w.level, w.severity, w.category, w.what FROM ("
        " SELECT CASE WHEN grouping(v.category) = 1 THEN 2 WHEN grouping(v.what) = 1 THEN 1 ELSE 0 END AS level,"
        " v.severity, coalesce(v.category, '') AS category, coalesce(v.what, '') AS what"
        f" FROM ({' UNION ALL '.join(keys)}) AS v"
        " GROUP BY GROUPING SETS ((v.severity, v.category, v.what), (v.severity, v.category), (v.severity))) w"
        f" WHERE NOT EXISTS (SELECT FROM corpora_messageclass c WHERE {match})"
        " ORDER BY 1, 2, 3, 4 ON CONFLICT DO NOTHING"
    )


# The dictionary's unused rows, once every task row and tally of the data set is written: a class the
# vocabularies allow but no task drew (or its rollup), which the writer would never have added.
CLASSES_UNUSED_SQL = (
    "DELETE FROM corpora_messageclass c"
    " WHERE NOT EXISTS (SELECT FROM corpora_messagetally t WHERE t.message_class_id = c.id)"
)

# Each level-0 class with its two rollups, to look the generated messages up by (severity, category, what).
CLASS_MAP_SQL = (
    "CREATE TEMP TABLE bench_reports_class ON COMMIT DROP AS"
    " SELECT c.severity::text AS severity, c.category::text AS category, c.what::text AS what,"
    " c.id AS class_id, r.id AS category_id, s.id AS severity_id"
    " FROM corpora_messageclass c"
    " JOIN corpora_messageclass r ON r.level = 1 AND r.severity = c.severity AND r.category = c.category"
    " AND r.what = ''"
    " JOIN corpora_messageclass s ON s.level = 2 AND s.severity = c.severity AND s.category = '' AND s.what = ''"
    " WHERE c.level = 0"
)


def task_rows_sql(frame_filter: str) -> str:
    """INSERT of the task rows (corpora_taskmessages) of the frame rows `frame_filter` keeps, folded per
    task as the message writer folds a task's messages; parameters: corpus id, service id. Needs
    CLASS_MAP_SQL's table. `a`: the task's messages in log order as class and rollup ids and details;
    `k`: its distinct classes in order of first appearance with their counts; `q`: each message as its
    class's 1-based place in `k`; `r`: its category and severity rollups in order of first appearance
    (a class's category rollup before its severity rollup, as the writer adds them) with their counts."""
    return (
        f"INSERT INTO corpora_taskmessages ({TASK_ROW_COLUMNS})"
        " SELECT f.task_id, %s, %s, f.status, k.classes, k.counts, r.rollups, r.counts, q.sequence, a.details"
        f" FROM bench_reports_frame f {frame_filter}"
        " CROSS JOIN LATERAL (SELECT array_agg(c.class_id ORDER BY m.position) AS seq,"
        "   array_agg(c.category_id ORDER BY m.position) AS categories,"
        "   array_agg(c.severity_id ORDER BY m.position) AS severities,"
        f"   array_agg({DETAILS} ORDER BY m.position) AS details"
        f"   FROM ({_branches()}) AS m"
        # LEFT: a message of a class the dictionary lacks becomes a NULL class, which no row below takes.
        "   LEFT JOIN bench_reports_class c"
        "   ON c.severity = m.severity AND c.category = m.category AND c.what = m.what) a"
        " CROSS JOIN LATERAL (SELECT array_agg(g.class_id ORDER BY g.first) AS classes,"
        "   array_agg(g.n ORDER BY g.first) AS counts"
        "   FROM (SELECT u.class_id, min(u.o) AS first, count(*)::integer AS n"
        "   FROM unnest(a.seq) WITH ORDINALITY AS u(class_id, o) GROUP BY u.class_id) g) k"
        " CROSS JOIN LATERAL (SELECT array_agg(array_position(k.classes, u.class_id) ORDER BY u.o) AS sequence"
        "   FROM unnest(a.seq) WITH ORDINALITY AS u(class_id, o)) q"
        # Element e of categories || severities is message e's category rollup (e <= n, the messages), or
        # message e - n's severity rollup; 2 e and 2 (e - n) + 1 put each in the writer's order.
        " CROSS JOIN LATERAL (SELECT array_agg(g.id ORDER BY g.first) AS rollups, array_agg(g.n ORDER BY g.first)"
        "   AS counts FROM (SELECT u.id, count(*)::integer AS n,"
        "   min(CASE WHEN u.e <= cardinality(a.seq) THEN 2 * u.e ELSE 2 * (u.e - cardinality(a.seq)) + 1 END) AS first"
        "   FROM unnest(a.categories || a.severities) WITH ORDINALITY AS u(id, e) GROUP BY u.id) g) r"
    )


def task_classes_sql(scope: str) -> str:
    """INSERT of the (task, class) rows of the task rows `scope` (a JOIN/WHERE fragment on `x`) keeps."""
    return (
        "INSERT INTO corpora_taskclass (task_id, corpus_id, service_id, message_class_id, task_status, document_id)"
        " SELECT x.task_id, x.corpus_id, x.service_id, u.class_id, x.task_status, t.document_id"
        " FROM corpora_taskmessages x JOIN corpora_task t ON t.id = x.task_id"
        f" CROSS JOIN LATERAL unnest(x.classes) AS u(class_id) {scope}"
    )


def tallies_sql(scope: str) -> str:
    """Add to the tallies the tasks and messages of the task rows `scope` (a JOIN/WHERE fragment on `x`)
    keeps, per (corpus, service, status, class or rollup): the recount of those rows, added in key order."""
    return (
        "INSERT INTO corpora_messagetally (corpus_id, service_id, task_status, message_class_id, tasks, messages)"
        " SELECT x.corpus_id, x.service_id, x.task_status, u.class_id, count(*), sum(u.n)"
        " FROM corpora_taskmessages x"
        " CROSS JOIN LATERAL unnest(x.classes || x.rollups, x.counts || x.rollup_counts) AS u(class_id, n)"
        f" {scope}"
        " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
        " ON CONFLICT (corpus_id, service_id, task_status, message_class_id) DO UPDATE"
        " SET tasks = corpora_messagetally.tasks + EXCLUDED.tasks,"
        " messages = corpora_messagetally.messages + EXCLUDED.messages"
    )


# The message tables, for VACUUM (ANALYZE) lists and sizes.
MESSAGE_TABLES = ("corpora_messageclass", "corpora_taskmessages", "corpora_taskclass", "corpora_messagetally")
MESSAGE_TABLES_SQL = ", ".join(MESSAGE_TABLES)


def runtimes_sql(frame_filter: str) -> str:
    """INSERT of log-normal runtimes for the frame rows `frame_filter` keeps; params: corpus, service."""
    normal = "sqrt(-2 * ln(1 - bench_u(f.i, 11))) * cos(2 * pi() * bench_u(f.i, 12))"
    return (
        "INSERT INTO corpora_taskruntime (task_id, corpus_id, service_id, runtime_ms)"
        f" SELECT f.task_id, %s, %s, least(greatest(round(exp(ln(2500) + 1.1 * {normal})), 20), 3600000)::int"
        f" FROM bench_reports_frame f {frame_filter}"
    )


def generated_state() -> dict | None:
    """The meta row of a complete earlier build, or None."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(FUNCTIONS)
        cursor.execute("SELECT value FROM bench_reports_meta WHERE key = 'complete'")
        row = cursor.fetchone()
    if not row:
        return None
    # Django's psycopg backend hands jsonb over as text (its JSONField decodes it).
    return json.loads(row[0]) if isinstance(row[0], str) else row[0]


def _task_class_indexes(cursor: Any) -> tuple[list[str], list[str]]:
    """The statements that drop the (task, class) table's key and indexes, and those that build them again
    with the same definitions."""
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = 'corpora_taskclass'::regclass AND contype IN ('p', 'u') ORDER BY conname"
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        " AND tablename = 'corpora_taskclass' AND indexname <> ALL(%s) ORDER BY indexname",
        [[name for name, _ in constraints]],
    )
    indexes = cursor.fetchall()
    drops = [f'ALTER TABLE corpora_taskclass DROP CONSTRAINT "{name}"' for name, _ in constraints]
    drops += [f'DROP INDEX "{name}"' for name, _ in indexes]
    builds = [f'ALTER TABLE corpora_taskclass ADD CONSTRAINT "{name}" {definition}' for name, definition in constraints]
    builds += [definition for _, definition in indexes]
    return drops, builds


def data_generate(tasks: int, actor: str) -> Generation:
    """Build the whole data set in an empty benchmark database; seconds per step."""
    from django.db import connection, transaction

    from corpora.actions.corpora import _import_service_id
    from services.actions import service_register
    from services.models import Service

    if tasks % TASK_MULTIPLE:
        raise ValueError(f"tasks must be a multiple of {TASK_MULTIPLE}")
    steps: dict[str, float] = {}

    def step(name: str, started: float) -> None:
        steps[name] = time.perf_counter() - started
        print(f"  {name:<34} {steps[name]:7.1f} s", flush=True)

    service = Service.objects.filter(name=SERVICE).first() or service_register(
        name=SERVICE, actor=actor, description="LaTeX to HTML (benchmark)"
    )
    import_id = _import_service_id()
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        corpus_id = harness.corpus_insert(
            cursor,
            name=CORPUS,
            description="reports benchmark",
            service_ids=[service.pk],
            actor=actor,
            documents=tasks,
            prefix="p",
            digits=7,
        )
    step("corpus, documents", began)

    began = time.perf_counter()
    status = STATUS_OF_R.format(r="mod(37 * substr(d.name, 2)::int, 100)")
    with transaction.atomic(), connection.cursor() as cursor:
        # Two statements, so the statement-level triggers fill corpora_taskcount as on a real import.
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            " SELECT %s, %s, d.id, -1 FROM corpora_document d WHERE d.corpus_id = %s ORDER BY d.id",
            [corpus_id, import_id, corpus_id],
        )
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            f" SELECT %s, %s, d.id, {status} FROM corpora_document d WHERE d.corpus_id = %s ORDER BY d.id",
            [corpus_id, service.pk, corpus_id],
        )
    step("tasks (2 x tasks, count triggers)", began)

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_reports_frame")
        cursor.execute(
            "CREATE TABLE bench_reports_frame AS"
            " SELECT i, mod(i, 100) AS s, i / 100 AS j, t.id AS task_id, d.name, t.status,"
            "        mod(37 * i, 100) BETWEEN 65 AND 74 AS special"
            "   FROM corpora_task t JOIN corpora_document d ON d.id = t.document_id,"
            "        LATERAL (SELECT substr(d.name, 2)::int AS i) AS x"
            "  WHERE t.corpus_id = %s AND t.service_id = %s ORDER BY i",
            [corpus_id, service.pk],
        )
        cursor.execute("ALTER TABLE bench_reports_frame ADD PRIMARY KEY (i)")
        cursor.execute("CREATE UNIQUE INDEX bench_reports_frame_task ON bench_reports_frame (task_id)")
        cursor.execute("ANALYZE bench_reports_frame")
    step("frame table", began)

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(classes_sql())
    step("message classes", began)

    # The task rows are appended in task order (the frame's), so their key is a plain append. The (task,
    # class) rows' key and task index are dropped first and built again after, with the same definitions.
    pair = "WHERE x.corpus_id = %s AND x.service_id = %s"
    with connection.cursor() as cursor:
        drops, builds = _task_class_indexes(cursor)
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(CLASS_MAP_SQL)
        cursor.execute("ANALYZE bench_reports_class")
        cursor.execute(task_rows_sql(""), [corpus_id, service.pk])
        cursor.execute(
            "SELECT coalesce(sum(cardinality(x.sequence)), 0) FROM corpora_taskmessages x " + pair,
            [corpus_id, service.pk],
        )
        messages = int(cursor.fetchone()[0])
    step(f"task rows ({messages:,} messages)", began)
    if messages != MESSAGES_PER_TASK * tasks:
        raise RuntimeError(f"generated {messages} messages, expected {MESSAGES_PER_TASK * tasks}")
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in drops:
            cursor.execute(statement)
        cursor.execute(task_classes_sql(pair), [corpus_id, service.pk])
        cursor.execute(tallies_sql(pair), [corpus_id, service.pk])
        cursor.execute(CLASSES_UNUSED_SQL)
    step("(task, class) rows, tallies", began)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for statement in builds:
            cursor.execute(statement)
        cursor.execute("RESET maintenance_work_mem")
    step("(task, class) key and index", began)

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(runtimes_sql(""), [corpus_id, service.pk])  # the runtime count triggers must see it
    step("runtimes", began)

    began = time.perf_counter()
    with connection.cursor() as cursor:
        # A settled database: autovacuum would have done this soon after real imports and runs.
        cursor.execute(
            f"VACUUM (ANALYZE) corpora_document, corpora_task, corpora_taskcount, {MESSAGE_TABLES_SQL},"
            " corpora_taskruntime"
        )
    step("vacuum analyze", began)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_reports_meta (key, value) VALUES ('complete', jsonb_build_object("
            "'tasks', %s::int, 'messages', %s::bigint, 'steps', %s::jsonb))",
            [tasks, messages, _json(steps)],
        )
    return Generation(tasks=tasks, messages=messages, reused=False, steps=steps)


def data_ensure(tasks: int, actor: str) -> None:
    """Reuse the data set of an earlier complete build, or build it now (printing which and how long)."""
    state = generated_state()
    if state:
        print(f"data: reused ({state['tasks']:,} tasks, {state['messages']:,} messages)")
        return
    print(f"data: generating {tasks:,} tasks and {tasks * MESSAGES_PER_TASK:,} messages")
    began = time.perf_counter()
    generation = data_generate(tasks, actor)
    print(f"data: generated in {time.perf_counter() - began:.1f} s ({generation.messages:,} messages)")


def _json(value: object) -> str:
    return json.dumps(value)


def data_restore() -> dict[str, float]:
    """Put back every tex_to_html task whose status no longer matches the generated one (a rerun set
    them TODO): their messages (task rows, (task, class) rows, their share of the tallies) and runtimes
    regenerated exactly, their status back. Seconds per step.

    Nothing is subtracted from the tallies: the rerun's own message deleter took these tasks' share
    away, so their regenerated rows' share is added back. Should any of these tasks still hold a task
    row (a status changed by hand, a test), those rows are deleted and the pair's tallies counted again
    from its remaining task rows, in the same transaction, before the regenerated rows' share is added."""
    from django.db import connection, transaction

    from corpora.models import Corpus
    from corpora.pairs import run_close
    from services.models import Service

    corpus_id = Corpus.objects.get(name=CORPUS).pk
    service_id = Service.objects.get(name=SERVICE).pk
    changed = "JOIN corpora_task t ON t.id = f.task_id AND t.status <> f.status"
    steps: dict[str, float] = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM bench_reports_frame f {changed}")
        if cursor.fetchone()[0] == 0:
            return steps
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        # The tasks to put back, kept for the session (the steps below are transactions of their own).
        cursor.execute("DROP TABLE IF EXISTS pg_temp.bench_reports_restore")
        cursor.execute(
            f"CREATE TEMP TABLE bench_reports_restore AS SELECT f.task_id FROM bench_reports_frame f {changed}"
        )
        cursor.execute("ALTER TABLE bench_reports_restore ADD PRIMARY KEY (task_id)")
        cursor.execute("ANALYZE bench_reports_restore")
        cursor.execute("DELETE FROM corpora_taskmessages x USING bench_reports_restore b WHERE x.task_id = b.task_id")
        leftovers = cursor.rowcount
        cursor.execute("DELETE FROM corpora_taskclass p USING bench_reports_restore b WHERE p.task_id = b.task_id")
        cursor.execute("DELETE FROM corpora_taskruntime x USING bench_reports_restore b WHERE x.task_id = b.task_id")
        if leftovers:
            # Their share is still in the tallies: the pair's tallies are counted again, without them.
            cursor.execute(
                "DELETE FROM corpora_messagetally WHERE corpus_id = %s AND service_id = %s", [corpus_id, service_id]
            )
            cursor.execute(tallies_sql("WHERE x.corpus_id = %s AND x.service_id = %s"), [corpus_id, service_id])
    with connection.cursor() as cursor:
        # Frees the rerun's deleted rows first, so the regenerated ones refill those pages.
        cursor.execute("VACUUM corpora_taskmessages, corpora_taskclass, corpora_messagetally, corpora_taskruntime")
    steps["delete leftovers, vacuum"] = time.perf_counter() - began
    began = time.perf_counter()
    restored = "JOIN bench_reports_restore b ON b.task_id = f.task_id"
    scope = "JOIN bench_reports_restore b ON b.task_id = x.task_id"
    with transaction.atomic(), connection.cursor() as cursor:
        # Every class of these tasks is in the dictionary: they drew the same when the data were generated.
        cursor.execute(CLASS_MAP_SQL)
        cursor.execute("ANALYZE bench_reports_class")
        cursor.execute(task_rows_sql(restored), [corpus_id, service_id])
        cursor.execute(task_classes_sql(scope), [])
        cursor.execute(tallies_sql(scope), [])
        cursor.execute(runtimes_sql(restored), [corpus_id, service_id])  # the runtime count triggers see these
        cursor.execute(
            "UPDATE corpora_task t SET status = f.status, attempts = 0, leased_until = NULL"
            " FROM bench_reports_frame f WHERE t.id = f.task_id AND t.status <> f.status"
        )
        cursor.execute("DROP TABLE bench_reports_restore")
    run_close(corpus_id=corpus_id, service_id=service_id)
    steps["regenerate messages, runtimes, status"] = time.perf_counter() - began
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) corpora_task, corpora_taskcount, {MESSAGE_TABLES_SQL}, corpora_taskruntime")
    steps["vacuum analyze"] = time.perf_counter() - began
    return steps
