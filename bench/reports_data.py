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
Runtimes: one row per tex_to_html task, log-normal around 2.5 s (sigma 1.1), clamped to 20 ms..1 h.

The table bench_reports_frame (index i -> task id, name, generated status) and the functions bench_u
and bench_zipf live only in the benchmark database.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

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


def _branch(severity: str, count_sql: str, vocabulary: tuple[int, list[tuple[str, str]]], seed: int) -> str:
    """The messages of one severity for the frame row `f`: `count_sql` of them, Zipf-drawn."""
    whats, pairs = vocabulary
    size = len(pairs)
    categories = _literal_array([c for c, _ in pairs])
    templates = _literal_array([t for _, t in pairs])
    u = f"bench_u(f.i::bigint * 64 + k, {seed})"
    rank = f"bench_zipf({u}, {whats})"
    if severity == "info":  # the first info line of every task is a loaded_file
        rank = f"CASE WHEN k = 1 THEN (bench_zipf({u}, {whats // size}) - 1) * {size} + 1 ELSE {rank} END"
    category = f"{categories}[mod(z.z - 1, {size}) + 1]"
    what = f"replace({templates}[mod(z.z - 1, {size}) + 1], '#', z.z::text)"
    if severity == "error":
        special_what = SPECIAL_WHAT.replace("'", "''")
        category = f"CASE WHEN f.special AND k = 1 THEN '{SPECIAL_CATEGORY}' ELSE {category} END"
        what = f"CASE WHEN f.special AND k = 1 THEN '{special_what}' ELSE {what} END"
    return (
        f"SELECT '{severity}'::text AS severity, k, {category} AS category, {what} AS what"
        f" FROM generate_series(1, {count_sql}) AS k, LATERAL (SELECT {rank} AS z) AS z"
    )


def messages_sql(frame_filter: str) -> str:
    """INSERT of the messages of the frame rows that `frame_filter` (a JOIN/WHERE fragment) keeps;
    parameters: corpus id, service id."""
    branches = " UNION ALL ".join(
        [
            _branch("info", "4 + mod(f.j + f.s, 5)", INFO, 101),
            _branch(
                "warning", "CASE WHEN f.status IN (-2, -3) THEN 2 + mod(3 * f.j + f.s, 5) ELSE 0 END", WARNING, 102
            ),
            _branch("error", "CASE WHEN f.status = -3 THEN 3 + mod(7 * f.j + f.s, 5) ELSE 0 END", ERROR, 103),
            _branch("fatal", "CASE WHEN f.status IN (-4, -5) THEN 2 + mod(f.j + f.s, 4) ELSE 0 END", FATAL, 104),
        ]
    )
    details = (
        "f.name || '.tex; line ' || (1 + (hashint8extended(f.i::bigint * 64 + m.k, 7) & 4095))"
        " || ' col ' || mod(f.i + m.k, 80) || ' - ' || m.category || ' ' || m.what"
        " || ' while digesting the body - In Core::Definition::Expandable'"
    )
    return (
        "INSERT INTO reports_logmessage"
        " (task_id, corpus_id, service_id, task_status, severity, category, what, details)"
        f" SELECT f.task_id, %s, %s, f.status, m.severity, m.category, m.what, {details}"
        f" FROM bench_reports_frame f {frame_filter} CROSS JOIN LATERAL ({branches}) AS m"
    )


def runtimes_sql(frame_filter: str) -> str:
    """INSERT of log-normal runtimes for the frame rows `frame_filter` keeps; params: corpus, service."""
    normal = "sqrt(-2 * ln(1 - bench_u(f.i, 11))) * cos(2 * pi() * bench_u(f.i, 12))"
    return (
        "INSERT INTO reports_taskruntime (task_id, corpus_id, service_id, runtime_ms)"
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


def data_generate(tasks: int, actor: str) -> Generation:
    """Build the whole data set in an empty benchmark database; seconds per step."""
    from django.db import connection, transaction

    from corpora.actions import _import_service_id
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
        cursor.execute(
            "INSERT INTO corpora_corpus (name, path, description, state, created_at, imported_at)"
            " VALUES (%s, %s, 'reports benchmark', 'ready', now(), now())"
            " RETURNING id",
            [CORPUS, str(harness.CORPUS_ROOT / CORPUS)],
        )
        corpus_id = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO corpora_activation (corpus_id, service_id, actor, created_at) VALUES (%s, %s, %s, now())",
            [corpus_id, service.pk, actor],
        )
        cursor.execute(
            "INSERT INTO corpora_document (corpus_id, name, entry, kind, main_file, created_at)"
            " SELECT %s, n, n || '.tex', 'tex', n || '.tex', now()"
            " FROM (SELECT 'p' || lpad(g::text, 7, '0') AS n FROM generate_series(0, %s - 1) g) s ORDER BY n",
            [corpus_id, tasks],
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

    # Without the two secondary indexes the 10M-row insert is a plain append; they are rebuilt after,
    # with the same definitions. Foreign-key checks are skipped (replica role): every row derives
    # from a task of the same corpus and service, by construction.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'reports_logmessage'"
            " AND indexname NOT LIKE '%pkey'"
        )
        indexes = cursor.fetchall()
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(messages_sql(""), [corpus_id, service.pk])
        messages = cursor.rowcount
    step(f"messages ({messages:,})", began)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for _, definition in indexes:
            # A partitioned table's index reads "ON ONLY" the parent; built "ON" it, it covers every partition.
            cursor.execute(definition.replace(" ON ONLY ", " ON ", 1))
        cursor.execute("RESET maintenance_work_mem")
    step("message indexes", began)

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(runtimes_sql(""), [corpus_id, service.pk])  # the runtime count triggers must see it
    step("runtimes", began)

    began = time.perf_counter()
    with connection.cursor() as cursor:
        # A settled database: autovacuum would have done this soon after real imports and runs.
        cursor.execute(
            "VACUUM (ANALYZE) corpora_document, corpora_task, corpora_taskcount, reports_logmessage,"
            " reports_taskruntime"
        )
    step("vacuum analyze", began)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_reports_meta (key, value) VALUES ('complete', jsonb_build_object("
            "'tasks', %s::int, 'messages', %s::bigint, 'steps', %s::jsonb))",
            [tasks, messages, _json(steps)],
        )
    return Generation(tasks=tasks, messages=messages, reused=False, steps=steps)


def _json(value: object) -> str:
    return json.dumps(value)


def data_restore() -> dict[str, float]:
    """Put back every tex_to_html task whose status no longer matches the generated one (a rerun set
    them TODO): their messages and runtimes regenerated exactly, their status back. Seconds per step."""
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
        cursor.execute(
            f"DELETE FROM reports_logmessage m USING bench_reports_frame f {changed} WHERE m.task_id = f.task_id"
        )
        cursor.execute(
            f"DELETE FROM reports_taskruntime r USING bench_reports_frame f {changed} WHERE r.task_id = f.task_id"
        )
    with connection.cursor() as cursor:
        # Frees the rerun's deleted rows first, so the regenerated ones refill those pages.
        cursor.execute("VACUUM reports_logmessage, reports_taskruntime")
    steps["delete leftovers, vacuum"] = time.perf_counter() - began
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(messages_sql(changed), [corpus_id, service_id])
        cursor.execute("SET LOCAL session_replication_role = origin")  # the count triggers must see these
        cursor.execute(runtimes_sql(changed), [corpus_id, service_id])
        cursor.execute(
            "UPDATE corpora_task t SET status = f.status, attempts = 0, leased_until = NULL"
            " FROM bench_reports_frame f WHERE t.id = f.task_id AND t.status <> f.status"
        )
    run_close(corpus_id=corpus_id, service_id=service_id)
    steps["regenerate messages, runtimes, status"] = time.perf_counter() - began
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_task, corpora_taskcount, reports_logmessage, reports_taskruntime")
    steps["vacuum analyze"] = time.perf_counter() - began
    return steps
