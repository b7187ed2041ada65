# ruff: noqa: S608  (the SQL here is assembled from this module's own constants and integers, never from input)
"""The data set of bench_scale.py (issue #25): arXiv's size, messages in the shape of real conversions,
built set-based in SQL and reused by later runs with the same options.

Shape. `message_shape` converts the sample corpus once and keeps its logs' shape; `scaled_messages` makes
any task's messages from it, scaled to about `messages_per_task` a task (the sample's class mix by tasks
and by messages, its spread of messages per task, its details' lengths). Python makes only a pool of
about POOL task templates from it (template t is `scaled_messages(shape, t, per_task)`; the pool is a
multiple of the sample's documents, so each document is the model of as many templates and the class
mix by tasks is the sample's) and SPECIAL_POOL
special ones: error templates with one more message, (error, SPECIAL_CATEGORY, SPECIAL_WHAT), the
what-class the rerun takes. Each template is turned into a task row exactly as the message writer
(corpora.message_store.messages_write) would (classes in first-appearance order with their counts, rollups,
the log order as indexes into the classes, the details), its classes added to the dictionary by the
writer's own `message_classes`, and the pool is copied into the table scale_template.

Tasks. One ready corpus with `tasks` documents (p00000000 ...), one no_problem import task each and one
tex_to_html task each. Document i takes the template scale_template_of(i): exactly `rerun_tasks` of
them (i a multiple of tasks // rerun_tasks) a special template, every other one a template of the pool
by a hash of i. The task's status is its template's. Then, each one statement over all tasks: the task
rows of messages (corpora_taskmessages), the (task, class) rows (corpora_taskclass, its indexes built
after the rows), the tallies (corpora_messagetally, summed per template and multiplied out), the
runtimes (log-normal around 2.5 s, their count triggers firing), and one closed run with its snapshot.
The count triggers of corpora_task fill corpora_taskcount as on a real import.

Bench-only tables: scale_template, scale_frame (i -> task id, template) and scale_made (the options the
data set was built with, its build steps and the last run and snapshot ids of the generation).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import harness
import message_shape

CORPUS = "bench-scale"
SERVICE = "tex_to_html"
SPECIAL_CATEGORY = "undefined"
SPECIAL_WHAT = "\\bench@hundredk"
SPECIAL_DETAILS = "main.tex; line 1 col 1 - undefined \\bench@hundredk while digesting the preamble"
POOL = 4096  # templates of ordinary tasks, about (a multiple of the sample's documents)
SPECIAL_POOL = 64  # templates of the rerun's what-class
SEED = 25
FORMAT = 1  # raise when what is generated changes: an older data set is then built again
MASK62 = (1 << 62) - 1

# What one task costs on disk besides its messages (its document, two tasks, a runtime, the frame and
# snapshot entries, with their indexes: about 1,200 bytes measured on 20,000 tasks; the activation adds a
# task for a while), and one message in the four message tables (26 bytes measured at 150 a task: the
# task row with its TOASTed details, the (task, class) rows, tallies, dictionary), with headroom for the
# WAL and the sorts of the index builds.
TASK_BYTES = 1_600
MESSAGE_BYTES = 40
FIXED_BYTES = 4 << 30

WORK_MEM = "SET LOCAL work_mem = '256MB'"
MESSAGE_TABLES = ("corpora_messageclass", "corpora_taskmessages", "corpora_taskclass", "corpora_messagetally")
META = (
    "CREATE TABLE IF NOT EXISTS scale_made (key text PRIMARY KEY, options jsonb NOT NULL, complete boolean NOT NULL,"
    " tasks bigint, messages bigint, steps jsonb, last_run bigint, last_snapshot bigint)"
)

Message = tuple[str, str, str, str]


@dataclass(frozen=True)
class Options:
    """What a data set is built from; a data set is reused only by a run with the same options."""

    tasks: int
    messages_per_task: float
    rerun_tasks: int
    shape_digest: str
    pool: int  # ordinary templates: a multiple of the sample's documents (pool_size)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "tasks": self.tasks, "messages_per_task": self.messages_per_task,
            "rerun_tasks": self.rerun_tasks, "pool": self.pool, "special_pool": SPECIAL_POOL, "seed": SEED,
            "shape": self.shape_digest,
        }  # fmt: skip


def pool_size(shape: message_shape.Shape) -> int:
    """About POOL, and a multiple of the sample's documents."""
    documents = len(shape.documents)
    return documents * -(-POOL // documents)


def shape_digest(shape: message_shape.Shape) -> str:
    """A short digest of the sample's shape: a new conversion of the sample makes another data set."""
    text = json.dumps({"statuses": shape.statuses, "documents": shape.documents}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def estimate_bytes(tasks: int, messages_per_task: float) -> int:
    """What the data set may take on disk at most, with the headroom of FIXED_BYTES."""
    return int(tasks * TASK_BYTES + tasks * messages_per_task * MESSAGE_BYTES + FIXED_BYTES)


# --- templates ---------------------------------------------------------------------------------------


def special_templates(shape: message_shape.Shape, per_task: float, pool: int) -> list[tuple[int, list[Message]]]:
    """SPECIAL_POOL error tasks of the pool's shape, each with one more message: the rerun's what-class,
    just before its first error message."""
    found: list[tuple[int, list[Message]]] = []
    task = 0
    while len(found) < SPECIAL_POOL:
        status, messages = message_shape.scaled_messages(shape, task, per_task)
        task += 1
        if status != -3 or not messages:
            if task > pool and not found:
                raise ValueError("the sample's shape has no error task to make the rerun's what-class of")
            continue
        first = next((n for n, m in enumerate(messages) if m[0] == "error"), 0)
        special = ("error", SPECIAL_CATEGORY, SPECIAL_WHAT, SPECIAL_DETAILS)
        found.append((status, [*messages[:first], special, *messages[first:]]))
    return found


@dataclass
class TemplateRow:
    """One template as the message writer lays out a task row (corpora.message_store.messages_write)."""

    status: int
    classes: list[tuple[int, str, str, str]]
    counts: list[int]
    rollups: list[tuple[int, str, str, str]]
    rollup_counts: list[int]
    sequence: list[int]
    details: list[str]


def template_row(status: int, messages: Sequence[Message]) -> TemplateRow:
    """The writer's layout of one task's messages: classes in the order they first appear, rollups in the
    order the writer meets them, the log order, the details (message_shape caps the fields as the log
    parser does)."""
    from corpora.choices import ClassLevel

    CLASS, CATEGORY, SEVERITY = ClassLevel.CLASS, ClassLevel.CATEGORY, ClassLevel.SEVERITY

    place: dict[tuple[int, str, str, str], int] = {}
    counts: list[int] = []
    sequence: list[int] = []
    details: list[str] = []
    for severity, category, what, detail in messages:
        key = (CLASS, severity, category, what)
        index = place.get(key)
        if index is None:
            index = place[key] = len(counts) + 1
            counts.append(0)
        counts[index - 1] += 1
        sequence.append(index)
        details.append(detail)
    rollups: dict[tuple[int, str, str, str], int] = {}
    for (_, severity, category, _), count in zip(place, counts, strict=True):
        for key in ((CATEGORY, severity, category, ""), (SEVERITY, severity, "", "")):
            rollups[key] = rollups.get(key, 0) + count
    return TemplateRow(status, list(place), counts, list(rollups), list(rollups.values()), sequence, details)


_TEMPLATES: dict[tuple[str, float], list[tuple[int, list[Message]]]] = {}


def templates_make(shape: message_shape.Shape, per_task: float) -> list[tuple[int, list[Message]]]:
    """The pool: pool_size ordinary templates, then SPECIAL_POOL special ones (template ids in that order).
    Made once per process (the renumbering of details in message_shape takes most of the 10 s)."""
    key = (shape_digest(shape), per_task)
    if key not in _TEMPLATES:
        pool = pool_size(shape)
        ordinary = [message_shape.scaled_messages(shape, t, per_task) for t in range(pool)]
        if any(not messages for _, messages in ordinary):
            raise ValueError("a template without messages: the sample's shape has a document with an empty log")
        _TEMPLATES[key] = [*ordinary, *special_templates(shape, per_task, pool)]
    return _TEMPLATES[key]


def template_of_sql(options: Options) -> str:
    """The SQL function scale_template_of(i): the template of document i (see the module's docstring)."""
    special = options.rerun_tasks
    stride = max(options.tasks // special, 1) if special else 1
    return f"""
CREATE OR REPLACE FUNCTION scale_template_of(i bigint) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN {special} > 0 AND i % {stride} = 0 AND i / {stride} < {special}
              THEN {options.pool} + ((hashint8extended(i, {SEED + 1}) & {MASK62}) % {SPECIAL_POOL})::int
              ELSE ((hashint8extended(i, {SEED}) & {MASK62}) % {options.pool})::int END
$$"""


# Log-normal runtimes around 2.5 s (sigma 1.1), clamped to 20 ms .. 1 h, from the document's index.
_UNIFORM = "((hashint8extended(f.i::bigint, {seed}) & 9007199254740991)::float8 / 9007199254740992.0)"
RUNTIME_SQL = (
    "least(greatest(round(exp(ln(2500) + 1.1 * sqrt(-2 * ln(1 - " + _UNIFORM.format(seed=11) + "))"
    " * cos(2 * pi() * " + _UNIFORM.format(seed=12) + "))), 20), 3600000)::int"
)


# --- the meta row -------------------------------------------------------------------------------------


def made_state(conn: Any) -> dict[str, Any] | None:
    """The meta row of the data set in the database `conn` is connected to (psycopg), or None."""
    exists = conn.execute("SELECT to_regclass('scale_made') IS NOT NULL").fetchone()[0]
    if not exists:
        return None
    row = conn.execute(
        "SELECT options, complete, tasks, messages, steps, last_run, last_snapshot FROM scale_made WHERE key = 'data'"
    ).fetchone()
    if row is None:
        return None
    keys = ("options", "complete", "tasks", "messages", "steps", "last_run", "last_snapshot")
    return dict(zip(keys, row, strict=True))


def made_read() -> dict[str, Any]:
    """The meta row through Django's connection (after setup)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT options, tasks, messages, steps, last_run, last_snapshot FROM scale_made WHERE key = 'data'"
        )
        options, tasks, messages, steps, last_run, last_snapshot = cursor.fetchone()

    def decoded(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    steps = decoded(steps)
    return {"options": decoded(options), "tasks": tasks, "messages": messages, "steps": dict(steps["steps"]),
            "messages_seconds": steps["messages_seconds"], "last_run": last_run,
            "last_snapshot": last_snapshot}  # fmt: skip


# --- generation ---------------------------------------------------------------------------------------


@dataclass
class Generation:
    """How long each step of a build took, and what it made."""

    tasks: int = 0
    messages: int = 0
    steps: dict[str, float] = field(default_factory=dict)
    messages_seconds: float = 0.0  # the steps that write messages: task rows, (task, class) rows, indexes, tallies

    @property
    def seconds(self) -> float:
        return sum(self.steps.values())


def _indexes_of(cursor: Any, table: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(constraint name, definition) of the table's primary key and (name, CREATE INDEX) of its other indexes."""
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'",
        [table],
    )
    keys = cursor.fetchall()
    cursor.execute(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = %s AND NOT EXISTS"
        " (SELECT FROM pg_constraint c WHERE c.conrelid = %s::regclass AND c.conname = i.indexname)",
        [table, table],
    )
    return keys, cursor.fetchall()


def data_generate(options: Options, shape: message_shape.Shape, actor: str) -> Generation:
    """Build the whole data set into the freshly migrated benchmark database; prints each step."""
    from django.db import connection, transaction

    from corpora.actions.corpora import _import_service_id
    from corpora.message_store import message_classes
    from corpora.models import Run
    from corpora.pairs import run_close
    from services.actions import service_register
    from services.models import Service

    generation = Generation(tasks=options.tasks)

    def step(name: str, began: float) -> None:
        generation.steps[name] = time.perf_counter() - began
        print(f"  {name:<44} {generation.steps[name]:8.1f} s", flush=True)

    with connection.cursor() as cursor:
        cursor.execute(META)
        cursor.execute("DELETE FROM scale_made")
        cursor.execute(
            "INSERT INTO scale_made (key, options, complete) VALUES ('data', %s::jsonb, false)",
            [json.dumps(options.as_json())],
        )

    # Templates: made in Python (a few thousand tasks' worth), their classes added by the writer's own code.
    began = time.perf_counter()
    rows = [template_row(status, messages) for status, messages in templates_make(shape, options.messages_per_task)]
    with transaction.atomic(), connection.cursor() as cursor:
        keys = list(dict.fromkeys(key for row in rows for key in (*row.classes, *row.rollups)))
        ids = message_classes(cursor, keys)
        cursor.execute("DROP TABLE IF EXISTS scale_template")
        cursor.execute(
            "CREATE TABLE scale_template (id integer PRIMARY KEY, status smallint NOT NULL, classes integer[] NOT NULL,"
            " counts integer[] NOT NULL, rollups integer[] NOT NULL, rollup_counts integer[] NOT NULL,"
            " sequence integer[] NOT NULL, details text[] NOT NULL)"
        )
        # Compressed as the task rows are (reports migration 0010), so a copied value keeps its form.
        cursor.execute(
            "ALTER TABLE scale_template ALTER COLUMN details SET COMPRESSION lz4,"
            " ALTER COLUMN sequence SET COMPRESSION lz4, ALTER COLUMN classes SET COMPRESSION lz4,"
            " ALTER COLUMN counts SET COMPRESSION lz4"
        )
        copy_sql = (
            "COPY scale_template (id, status, classes, counts, rollups, rollup_counts, sequence, details) FROM STDIN"
        )
        with cursor.cursor.copy(copy_sql) as copy:
            for number, row in enumerate(rows):
                copy.write_row(
                    (number, row.status, [ids[k] for k in row.classes], row.counts, [ids[k] for k in row.rollups],
                     row.rollup_counts, row.sequence, row.details)
                )  # fmt: skip
        cursor.execute(template_of_sql(options))
        cursor.execute("ANALYZE scale_template")
    step(f"templates ({len(rows):,}, {len(keys):,} classes and rollups)", began)

    service = Service.objects.filter(name=SERVICE).first() or service_register(
        name=SERVICE, actor=actor, description="LaTeX to HTML (scale benchmark)"
    )
    import_id = _import_service_id()
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        corpus_id = harness.corpus_insert(
            cursor,
            name=CORPUS,
            description="scale benchmark",
            service_ids=[service.pk],
            actor=actor,
            documents=options.tasks,
            prefix="p",
            digits=8,
        )
    step("corpus, documents", began)

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        # Two statements, so the statement-level triggers fill corpora_taskcount as on a real import.
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            " SELECT %s, %s, d.id, -1 FROM corpora_document d WHERE d.corpus_id = %s ORDER BY d.id",
            [corpus_id, import_id, corpus_id],
        )
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            " SELECT %s, %s, d.id, p.status FROM corpora_document d"
            " JOIN scale_template p ON p.id = scale_template_of(substr(d.name, 2)::bigint)"
            " WHERE d.corpus_id = %s ORDER BY d.id",
            [corpus_id, service.pk, corpus_id],
        )
        cursor.execute("DROP TABLE IF EXISTS scale_frame")
        cursor.execute(
            "CREATE TABLE scale_frame AS SELECT substr(d.name, 2)::integer AS i, t.id AS task_id,"
            " scale_template_of(substr(d.name, 2)::bigint) AS template"
            " FROM corpora_document d JOIN corpora_task t ON t.document_id = d.id AND t.service_id = %s"
            " WHERE d.corpus_id = %s ORDER BY 1",
            [service.pk, corpus_id],
        )
        cursor.execute("ALTER TABLE scale_frame ADD PRIMARY KEY (i)")
        cursor.execute("CREATE UNIQUE INDEX scale_frame_task ON scale_frame (task_id)")
        cursor.execute("ANALYZE scale_frame")
    step("tasks (2 x tasks, count triggers), frame", began)

    pair = [corpus_id, service.pk]
    messages_began = time.perf_counter()
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        # In task order, so the table's and its key's pages are written in order (a walk of the frame's task
        # index with a lookup of each template, the plan; a sort would have to spill the rows to disk).
        cursor.execute(WORK_MEM)
        cursor.execute(
            "INSERT INTO corpora_taskmessages (task_id, corpus_id, service_id, task_status, classes, counts, rollups,"
            " rollup_counts, sequence, details)"
            " SELECT f.task_id, %s, %s, p.status, p.classes, p.counts, p.rollups, p.rollup_counts, p.sequence,"
            " p.details FROM scale_frame f JOIN scale_template p ON p.id = f.template ORDER BY f.task_id",
            pair,
        )
    step("task rows of messages", began)

    # The (task, class) rows without their indexes, which are built after: a sort each, not 40 million probes.
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        keys, indexes = _indexes_of(cursor, "corpora_taskclass")
        for name, _ in keys:
            cursor.execute(f'ALTER TABLE corpora_taskclass DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(WORK_MEM)
        cursor.execute(
            "INSERT INTO corpora_taskclass (task_id, corpus_id, service_id, message_class_id, task_status, document_id)"
            " SELECT f.task_id, %s, %s, u.class_id, p.status, t.document_id FROM scale_frame f"
            " JOIN corpora_task t ON t.id = f.task_id"
            " JOIN scale_template p ON p.id = f.template, unnest(p.classes) AS u(class_id) ORDER BY f.task_id",
            pair,
        )
        pair_rows = cursor.rowcount
    step(f"(task, class) rows ({pair_rows:,})", began)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for name, definition in keys:
            cursor.execute(f'ALTER TABLE corpora_taskclass ADD CONSTRAINT "{name}" {definition}')
        for _, definition in indexes:
            cursor.execute(definition)
        cursor.execute("RESET maintenance_work_mem")
    step("(task, class) indexes", began)

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        # Per template: its tasks times its counts, so the sum is over a few thousand rows.
        cursor.execute(
            "INSERT INTO corpora_messagetally (corpus_id, service_id, task_status, message_class_id, tasks, messages)"
            " SELECT %s, %s, p.status, u.class_id, sum(n.tasks), sum(n.tasks * u.messages)"
            " FROM (SELECT template, count(*) AS tasks FROM scale_frame GROUP BY template) n"
            " JOIN scale_template p ON p.id = n.template,"
            " unnest(p.classes || p.rollups, p.counts || p.rollup_counts) AS u(class_id, messages)"
            " GROUP BY p.status, u.class_id ORDER BY 3, 4",
            pair,
        )
        cursor.execute(
            "SELECT coalesce(sum(t.messages), 0) FROM corpora_messagetally t JOIN corpora_messageclass c"
            " ON c.id = t.message_class_id AND c.level = 2 WHERE t.corpus_id = %s AND t.service_id = %s",
            pair,
        )
        generation.messages = int(cursor.fetchone()[0])
    step("tallies", began)
    generation.messages_seconds = time.perf_counter() - messages_began

    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_taskruntime (task_id, corpus_id, service_id, runtime_ms)"
            f" SELECT f.task_id, %s, %s, {RUNTIME_SQL} FROM scale_frame f ORDER BY f.task_id",
            pair,
        )
    step("runtimes (count triggers)", began)

    began = time.perf_counter()
    run = Run.objects.create(corpus_id=corpus_id, service_id=service.pk, owner=actor, description="scale data set")
    run_close(corpus_id=corpus_id, service_id=service.pk)
    step("a closed run with its snapshot", began)

    began = time.perf_counter()
    with connection.cursor() as cursor:
        # A settled database: autovacuum would have done this soon after real imports and conversions.
        cursor.execute(
            "VACUUM (ANALYZE) corpora_document, corpora_task, corpora_taskcount, corpora_taskmessages,"
            " corpora_taskclass, corpora_messagetally, corpora_messageclass, corpora_taskruntime,"
            " corpora_runtimecount, corpora_runtimebin, corpora_snapshot"
        )
        cursor.execute("CHECKPOINT")
    step("vacuum analyze, checkpoint", began)

    # A list of pairs: jsonb would sort the keys of an object.
    steps = json.dumps({"steps": list(generation.steps.items()), "messages_seconds": generation.messages_seconds})
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM corpora_snapshot")
        last_snapshot = cursor.fetchone()[0]
        cursor.execute(
            "UPDATE scale_made SET complete = true, tasks = %s, messages = %s, steps = %s::jsonb, last_run = %s,"
            " last_snapshot = %s WHERE key = 'data'",
            [options.tasks, generation.messages, steps, run.pk, last_snapshot],
        )
    return generation


# --- restore after a rerun ------------------------------------------------------------------------------


def data_restore(corpus_id: int, service_id: int) -> dict[str, float]:
    """Put back every task whose status is not its template's (a rerun set it TODO): its messages, (task,
    class) rows, tallies and runtime from its template, its status, and close the run the rerun opened
    (which snapshots). The rerun's dead rows are vacuumed first, so the regenerated rows refill their
    pages and the data set keeps its size. Seconds per step; empty when nothing had changed."""
    from django.db import connection, transaction

    from corpora.message_store import messages_delete
    from corpora.pairs import run_close

    steps: dict[str, float] = {}
    began = time.perf_counter()
    pair = [corpus_id, service_id]
    scope = (
        "SELECT f.task_id AS id, f.i, f.template, p.status FROM scale_frame f"
        " JOIN scale_template p ON p.id = f.template JOIN corpora_task t ON t.id = f.task_id"
        " WHERE t.status <> p.status ORDER BY f.task_id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE scale_restore ON COMMIT DROP AS {scope}")
        if cursor.rowcount == 0:
            return steps
        messages_delete(cursor, scope="scale_restore")  # none after a whole rerun; an interrupted one may leave some
        cursor.execute("DELETE FROM corpora_taskruntime r USING scale_restore s WHERE r.task_id = s.id")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM corpora_taskmessages, corpora_taskclass, corpora_taskruntime, corpora_task")
    steps["vacuum the rerun's rows"] = time.perf_counter() - began
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE scale_restore ON COMMIT DROP AS {scope}")
        cursor.execute("ANALYZE scale_restore")
        cursor.execute(
            "INSERT INTO corpora_taskmessages (task_id, corpus_id, service_id, task_status, classes, counts, rollups,"
            " rollup_counts, sequence, details)"
            " SELECT s.id, %s, %s, p.status, p.classes, p.counts, p.rollups, p.rollup_counts, p.sequence, p.details"
            " FROM scale_restore s JOIN scale_template p ON p.id = s.template ORDER BY s.id",
            pair,
        )
        cursor.execute(
            "INSERT INTO corpora_taskclass (task_id, corpus_id, service_id, message_class_id, task_status, document_id)"
            " SELECT s.id, %s, %s, u.class_id, p.status, t.document_id FROM scale_restore s"
            " JOIN corpora_task t ON t.id = s.id"
            " JOIN scale_template p ON p.id = s.template, unnest(p.classes) AS u(class_id) ORDER BY s.id",
            pair,
        )
        cursor.execute(
            "INSERT INTO corpora_messagetally (corpus_id, service_id, task_status, message_class_id, tasks, messages)"
            " SELECT %s, %s, p.status, u.class_id, sum(n.tasks), sum(n.tasks * u.messages)"
            " FROM (SELECT template, count(*) AS tasks FROM scale_restore GROUP BY template) n"
            " JOIN scale_template p ON p.id = n.template,"
            " unnest(p.classes || p.rollups, p.counts || p.rollup_counts) AS u(class_id, messages)"
            " GROUP BY p.status, u.class_id ORDER BY 3, 4"
            " ON CONFLICT (corpus_id, service_id, task_status, message_class_id) DO UPDATE"
            " SET tasks = corpora_messagetally.tasks + EXCLUDED.tasks,"
            " messages = corpora_messagetally.messages + EXCLUDED.messages",
            pair,
        )
        cursor.execute(
            "INSERT INTO corpora_taskruntime (task_id, corpus_id, service_id, runtime_ms)"
            f" SELECT f.id, %s, %s, {RUNTIME_SQL} FROM scale_restore f ORDER BY f.id",
            pair,
        )
        cursor.execute(
            "UPDATE corpora_task t SET status = s.status, attempts = 0, leased_until = NULL"
            " FROM scale_restore s WHERE t.id = s.id"
        )
        restored = cursor.rowcount
    run_close(corpus_id=corpus_id, service_id=service_id)
    steps[f"regenerate {restored:,} tasks' messages, runtimes, status; close the run"] = time.perf_counter() - began
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM (ANALYZE) corpora_task, corpora_taskcount, corpora_taskmessages, corpora_taskclass,"
            " corpora_messagetally, corpora_taskruntime, corpora_runtimecount, corpora_runtimebin"
        )
    steps["vacuum analyze"] = time.perf_counter() - began
    return steps


def history_trim(corpus_id: int, service_id: int, last_run: int, last_snapshot: int) -> int:
    """Remove the runs, snapshots and diffs of the pair made after the generation (by measured operations),
    so that every run of the benchmark reads the same history. Returns how many snapshots went."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM corpora_run WHERE corpus_id = %s AND service_id = %s AND id > %s",
                       [corpus_id, service_id, last_run])  # fmt: skip
        snapshots = "SELECT id FROM corpora_snapshot WHERE corpus_id = %s AND service_id = %s AND id > %s"
        diffs = f"SELECT id FROM corpora_snapshotdiff WHERE previous_id IN ({snapshots}) OR current_id IN ({snapshots})"
        params = [corpus_id, service_id, last_snapshot] * 2
        cursor.execute(f"DELETE FROM corpora_taskdiff WHERE diff_id IN ({diffs})", params)
        cursor.execute(f"DELETE FROM corpora_snapshotdiff WHERE id IN ({diffs})", params)
        cursor.execute(
            f"DELETE FROM corpora_snapshot WHERE id IN ({snapshots})", [corpus_id, service_id, last_snapshot]
        )
        return cursor.rowcount


# --- checks ---------------------------------------------------------------------------------------------


def consistency_problems(corpus_id: int, service_id: int, shape: message_shape.Shape, per_task: float) -> list[str]:
    """Whole-table checks (for small data sets): the tallies equal a recount from the task rows, the (task,
    class) rows equal the task rows' classes, each task row is well formed and carries its task's status,
    the task counts equal a count, and some tasks read back through the view corpora_logmessage as the
    messages of their template."""
    from django.db import connection

    problems: list[str] = []
    checks: list[tuple[str, str]] = [
        (
            "tallies differ from the recount of the task rows",
            "SELECT count(*) FROM (SELECT x.corpus_id, x.service_id, x.task_status, u.class_id, count(*) AS tasks,"
            " sum(u.n) AS messages FROM corpora_taskmessages x,"
            " unnest(x.classes || x.rollups, x.counts || x.rollup_counts) AS u(class_id, n) GROUP BY 1, 2, 3, 4) r"
            " FULL JOIN (SELECT * FROM corpora_messagetally WHERE tasks <> 0 OR messages <> 0) t"
            " ON t.corpus_id = r.corpus_id AND t.service_id = r.service_id AND t.task_status = r.task_status"
            " AND t.message_class_id = r.class_id"
            " WHERE r.tasks IS DISTINCT FROM t.tasks OR r.messages IS DISTINCT FROM t.messages",
        ),
        (
            "(task, class) rows differ from unnest(classes)",
            "SELECT count(*) FROM ((SELECT x.task_id, x.corpus_id, x.service_id, u.class_id, x.task_status"
            " FROM corpora_taskmessages x, unnest(x.classes) AS u(class_id)"
            " EXCEPT ALL SELECT task_id, corpus_id, service_id, message_class_id, task_status FROM corpora_taskclass)"
            " UNION ALL (SELECT task_id, corpus_id, service_id, message_class_id, task_status FROM corpora_taskclass"
            " EXCEPT ALL SELECT x.task_id, x.corpus_id, x.service_id, u.class_id, x.task_status"
            " FROM corpora_taskmessages x, unnest(x.classes) AS u(class_id))) d",
        ),
        (
            "task rows malformed (counts, sequence, details, classes, rollups)",
            "SELECT count(*) FROM corpora_taskmessages x WHERE cardinality(x.sequence) <> cardinality(x.details)"
            " OR cardinality(x.classes) <> cardinality(x.counts)"
            " OR cardinality(x.rollups) <> cardinality(x.rollup_counts)"
            " OR (SELECT sum(c) FROM unnest(x.counts) c) <> cardinality(x.sequence)"
            " OR (SELECT max(s) FROM unnest(x.sequence) s) <> cardinality(x.classes)"
            " OR EXISTS (SELECT FROM generate_subscripts(x.classes, 1) AS k"
            "            WHERE x.counts[k] <> (SELECT count(*) FROM unnest(x.sequence) s WHERE s = k))",
        ),
        (
            "task rows whose status is not their task's",
            "SELECT count(*) FROM corpora_taskmessages x JOIN corpora_task t ON t.id = x.task_id"
            " WHERE t.status <> x.task_status OR t.corpus_id <> x.corpus_id OR t.service_id <> x.service_id",
        ),
        (
            "completed tasks of the pair without a task row",
            "SELECT count(*) FROM corpora_task t LEFT JOIN corpora_taskmessages x ON x.task_id = t.id"
            f" WHERE t.corpus_id = {int(corpus_id)} AND t.service_id = {int(service_id)} AND t.status < 0"
            " AND x.task_id IS NULL",
        ),
        (
            "task counts differ from a count of the tasks",
            "SELECT count(*) FROM (SELECT corpus_id, service_id, ccs_status_bucket(status) AS bucket, count(*) AS n"
            " FROM corpora_task GROUP BY 1, 2, 3) r FULL JOIN (SELECT * FROM corpora_taskcount WHERE count <> 0) c"
            " ON c.corpus_id = r.corpus_id AND c.service_id = r.service_id AND c.bucket = r.bucket"
            " WHERE r.n IS DISTINCT FROM c.count",
        ),
    ]
    with connection.cursor() as cursor:
        for problem, sql in checks:
            cursor.execute(sql)
            wrong = cursor.fetchone()[0]
            if wrong:
                problems.append(f"{problem}: {wrong}")
        # Some tasks read back, message by message, as their template's messages.
        cursor.execute("SELECT f.task_id, f.template FROM scale_frame f ORDER BY f.i LIMIT 8")
        sample = cursor.fetchall()
        cursor.execute(
            "SELECT f.task_id, f.template FROM scale_frame f WHERE f.template >= %s LIMIT 4", [pool_size(shape)]
        )
        sample += cursor.fetchall()
    templates = templates_make(shape, per_task)
    for task_id, template in sample:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT severity, category, what, details FROM corpora_logmessage WHERE task_id = %s ORDER BY position",
                [task_id],
            )
            read = [tuple(row) for row in cursor.fetchall()]
        if read != [tuple(m) for m in templates[template][1]]:
            problems.append(f"task {task_id} does not read back as its template {template}")
    return problems


def sizes(tables: Sequence[str]) -> dict[str, int]:
    """pg_total_relation_size of each table (heap, TOAST and indexes)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT t, pg_total_relation_size(t::regclass) FROM unnest(%s::text[]) AS t", [list(tables)])
        return dict(cursor.fetchall())


def database_size() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return cursor.fetchone()[0]


def pair_ids() -> tuple[int, int]:
    """(corpus id, service id) of the data set's pair."""
    from corpora.models import Corpus
    from services.models import Service

    return Corpus.objects.get(name=CORPUS).pk, Service.objects.get(name=SERVICE).pk
