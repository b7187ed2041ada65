"""A pair's document list on a corpus of 1,000,000 documents (target: a page in under 100 ms): every page
through corpora.queries.corpora.document_list, unfiltered, by status and by name prefix, at the first and the last
offset a page may take; and, with --index-costs, what each candidate index of the name search adds to
inserting those documents, as an import does.

The corpus is built in SQL (arXiv's names, YYMM.NNNNN, in the months of 2014 to 2023; one import task each,
and a converter's tasks with a spread of statuses, a runtime for each finished one and, for each with a
warning, an error or a fatal, the row of messages the list reads its first error from), then VACUUM
ANALYZE; the first 1,000 documents in the list's order get a result archive holding HTML, so a page also
pays for its results store checks.

Run: .venv/bin/python bench/bench_documents.py [--documents N] [--repeat N] [--explain] [--index-costs] [--rebuild]
"""

from __future__ import annotations

import argparse
import io
import statistics
import zipfile
from pathlib import Path

import harness

harness.configure("ccs_documents_bench", 5, Path("/tmp/ccs-documents-bench"))

PAGE_TARGET_MS = 100.0  # a first page (offset 0) of any filter
SERVICE = "bench-reader"
# A converter's outcome per task, by a hash of its id: 60% no_problem, 20% warning, 12% error, 5% fatal,
# 1% invalid, 2% TODO (the status numbers are corpora.statuses'; this SQL only spreads them).
STATUS_SPREAD = """CASE WHEN h < 600 THEN {no_problem} WHEN h < 800 THEN {warning} WHEN h < 920 THEN {error}
                        WHEN h < 970 THEN {fatal} WHEN h < 980 THEN {invalid} ELSE {todo} END"""
PAGES = [
    # (label, status, name_prefix, offset)
    ("all, first page", None, None, 0),
    ("all, last page (offset 100,000)", None, None, 100_000),
    ("no_problem, first page", "no_problem", None, 0),
    ("no_problem, offset 100,000", "no_problem", None, 100_000),
    ("fatal (5%), first page", "fatal", None, 0),
    ("fatal, offset 40,000", "fatal", None, 40_000),
    ("invalid (1%), first page", "invalid", None, 0),
    ("in_progress (2%), offset 10,000", "in_progress", None, 10_000),
    ("prefix '2301.' (a month), first page", None, "2301.", 0),
    ("prefix '2301.0012' (10 names)", None, "2301.0012", 0),
    ("prefix '1' (three fifths), offset 100,000", None, "1", 100_000),
    ("prefix '23' and fatal", "fatal", "23", 0),
    ("prefix 'zz' (nothing)", None, "zz", 0),
]


def corpus_build(name: str, documents: int) -> int:
    """The corpus, its documents and import tasks, the converter's tasks; returns the corpus id."""
    from django.db import connection, transaction

    from conversion.choices import TaskStatus
    from corpora.actions.corpora import _import_service_id

    service_id = harness.service_ensure(SERVICE)
    months = 120  # 2014 to 2023
    per_month = -(-documents // months)
    spread = STATUS_SPREAD.format(
        no_problem=TaskStatus.NO_PROBLEM, warning=TaskStatus.WARNING, error=TaskStatus.ERROR, fatal=TaskStatus.FATAL,
        invalid=TaskStatus.INVALID, todo=TaskStatus.TODO,
    )  # fmt: skip
    with harness.timed() as built, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_corpus (name, path, description, state, created_at, imported_at)"
            " VALUES (%s, %s, 'benchmark corpus built in SQL', 'ready', now(), now()) RETURNING id",
            [name, str(harness.CORPUS_ROOT / name)],
        )
        corpus_id = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO corpora_document (corpus_id, name, entry, kind, main_file, created_at)"
            " SELECT %s, m || '.' || lpad(n::text, 5, '0'), m || '/' || m || '.' || lpad(n::text, 5, '0') || '.gz',"
            " 'gz', 'main.tex', now()"
            " FROM (SELECT to_char(date '2014-01-01' + make_interval(months => k), 'YYMM') AS m"
            "       FROM generate_series(0, %s - 1) k) months, generate_series(1, %s) n LIMIT %s",
            [corpus_id, months, per_month, documents],
        )
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            " SELECT corpus_id, %s, id, -1 FROM corpora_document WHERE corpus_id = %s",
            [_import_service_id(), corpus_id],
        )
        cursor.execute(
            f"INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"  # noqa: S608 (fixed text)
            f" SELECT corpus_id, %s, id, {spread} FROM (SELECT corpus_id, id, hashint8(id) & 1023 AS h"
            " FROM corpora_document WHERE corpus_id = %s) d",
            [service_id, corpus_id],
        )
        messages_build(cursor, corpus_id, service_id)
    with harness.timed() as settled, connection.cursor() as cursor:
        cursor.execute(
            "VACUUM (ANALYZE) corpora_document, corpora_task, corpora_taskcount, corpora_taskruntime,"
            " corpora_taskmessages"
        )
    print(f"built {documents:,} documents in {built.seconds:.1f} s, VACUUM ANALYZE {settled.seconds:.1f} s")
    return corpus_id


def messages_build(cursor: object, corpus_id: int, service_id: int) -> None:
    """A runtime for each finished task and, for each warning, error and fatal task, its row of messages:
    a warning class first, then an error class, then a fatal one, as far as its status goes (only the rows
    the document list reads; the reports' tallies are not built)."""
    from conversion.choices import TaskStatus
    from corpora.message_store import message_classes

    keys = [
        (0, "warning", "expected", "label"),
        (0, "error", "undefined", "\\foo"),
        (0, "fatal", "too_many_errors", "100"),
    ]
    ids = message_classes(cursor, keys)
    warning, error, fatal = (ids[key] for key in keys)
    done = (TaskStatus.NO_PROBLEM, TaskStatus.WARNING, TaskStatus.ERROR, TaskStatus.FATAL)
    cursor.execute(
        "INSERT INTO corpora_taskruntime (task_id, corpus_id, service_id, runtime_ms)"
        " SELECT id, corpus_id, service_id, 200 + (hashint8(id) & 262143) FROM corpora_task"
        " WHERE corpus_id = %s AND service_id = %s AND status = ANY(%s)",
        [corpus_id, service_id, list(done)],
    )
    cursor.execute(
        "INSERT INTO corpora_taskmessages (task_id, corpus_id, service_id, task_status, classes, counts, rollups,"
        " rollup_counts, sequence, details)"
        " SELECT id, corpus_id, service_id, status, c, array_fill(1, ARRAY[cardinality(c)]), '{}', '{}',"
        " ARRAY(SELECT generate_series(1, cardinality(c))), array_fill(''::text, ARRAY[cardinality(c)])"
        " FROM (SELECT id, corpus_id, service_id, status, CASE status WHEN %s THEN ARRAY[%s]"
        "  WHEN %s THEN ARRAY[%s, %s] ELSE ARRAY[%s, %s, %s] END AS c FROM corpora_task"
        "  WHERE corpus_id = %s AND service_id = %s AND status = ANY(%s)) t",
        [TaskStatus.WARNING, warning, TaskStatus.ERROR, warning, error, warning, error, fatal,
         corpus_id, service_id, [TaskStatus.WARNING, TaskStatus.ERROR, TaskStatus.FATAL]],
    )  # fmt: skip


def results_write(corpus_id: int, count: int) -> None:
    """A result archive with HTML (a log, the paper, two style sheets, a figure) for the first `count`
    documents of the list."""
    from django.conf import settings
    from django.db import connection

    from corpora.results import result_file, result_file_write

    service_id = harness.service_ensure(SERVICE)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("cortex.log", "Status:conversion:0\n" * 40)
        archive.writestr("paper.html", "<!DOCTYPE html><html><body>" + "<p>text</p>" * 400 + "</body></html>")
        archive.writestr("LaTeXML.css", "p { margin: 0 }\n" * 800)
        archive.writestr("ltx-article.css", "h1 { text-align: center }\n" * 100)
        archive.writestr("x1.png", bytes(4000))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.id FROM corpora_document d JOIN corpora_task t ON t.document_id = d.id AND t.service_id = %s"
            ' WHERE d.corpus_id = %s ORDER BY lower(d.name) COLLATE "C", d.name LIMIT %s',
            [service_id, corpus_id, count],
        )
        task_ids = [row[0] for row in cursor.fetchall()]
    for task_id in task_ids:
        result_file_write(result_file(settings.RESULTS_DIR, corpus_id, service_id, task_id), buffer.getvalue())


def page_measure(corpus: str, repeat: int, explain: bool) -> list[tuple[str, float, float, int]]:
    """Each page of PAGES `repeat` times (after one warm-up): its label, median and worst milliseconds and
    rows."""
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from config.api.paging import Page
    from corpora.queries.corpora import document_list, pair_resolve

    measured = []
    for label, status, prefix, offset in PAGES:
        page = Page(offset=offset, page_size=100)
        with CaptureQueriesContext(connection) as captured:
            listing = document_list(pair_resolve(corpus, SERVICE), status=status, name_prefix=prefix, page=page)
        timings = []
        for _ in range(repeat):
            began = time.perf_counter()
            document_list(pair_resolve(corpus, SERVICE), status=status, name_prefix=prefix, page=page)
            timings.append((time.perf_counter() - began) * 1000)
        measured.append((label, statistics.median(timings), max(timings), len(listing.documents)))
        if explain:
            sql = next(q["sql"] for q in captured.captured_queries if "corpora_document d" in q["sql"])
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
                print(f"{label}:\n" + "\n".join(f"    {row[0]}" for row in cursor.fetchall()))
    return measured


INDEX_CANDIDATES = {
    "today's indexes": [],
    "+ document_name_folded (prefix search)": [
        'CREATE INDEX ON {t} (corpus_id, (lower(name) COLLATE "C"), name)',
    ],
    "+ a trigram GIN of lower(name) (substring search)": [
        "CREATE INDEX ON {t} USING gin (bench_name_trigrams(name))",
    ],
}


def index_costs(corpus_id: int) -> None:
    """INSERT ... SELECT of the corpus's documents into a copy of corpora_document with its indexes (as
    before this change), then with each candidate; the copies are dropped."""
    from django.db import connection

    print("inserting the documents again, per candidate index (best of 2):")
    with connection.cursor() as cursor:
        # pg_trgm is no part of the embedded PostgreSQL: a trigram index there is an array of a SQL function.
        cursor.execute(
            "CREATE OR REPLACE FUNCTION bench_name_trigrams(value text) RETURNS text[] LANGUAGE sql IMMUTABLE"
            " PARALLEL SAFE STRICT AS $$ SELECT ARRAY(SELECT substr(lower(value), i, 3)"
            " FROM generate_series(1, length(value) - 2) AS i) $$"
        )
        for label, statements in INDEX_CANDIDATES.items():
            best = None
            for _ in range(2):
                cursor.execute("DROP TABLE IF EXISTS bench_documents")
                cursor.execute(
                    "CREATE TABLE bench_documents (LIKE corpora_document INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
                )
                cursor.execute("CREATE UNIQUE INDEX ON bench_documents (corpus_id, name)")
                cursor.execute("CREATE UNIQUE INDEX ON bench_documents (corpus_id, entry)")
                cursor.execute("CREATE INDEX ON bench_documents (corpus_id)")
                cursor.execute("ALTER TABLE bench_documents ADD PRIMARY KEY (id)")
                for statement in statements:
                    cursor.execute(statement.format(t="bench_documents"))
                with harness.timed() as insert:
                    cursor.execute("INSERT INTO bench_documents SELECT * FROM corpora_document WHERE corpus_id = %s",
                                   [corpus_id])  # fmt: skip
                best = insert.seconds if best is None else min(best, insert.seconds)
            cursor.execute("SELECT pg_size_pretty(pg_indexes_size('bench_documents'))")
            print(f"  {label:52} {best:6.1f} s   indexes {cursor.fetchone()[0]}")
        cursor.execute("DROP TABLE IF EXISTS bench_documents")
        cursor.execute("DROP FUNCTION IF EXISTS bench_name_trigrams(text)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20, help="timed requests of each page")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE each page's statement")
    parser.add_argument("--index-costs", action="store_true", help="time the inserts under each candidate index")
    parser.add_argument("--rebuild", action="store_true", help="build the corpus again (else an earlier run's)")
    harness.quiet_arguments(parser, wait=900)
    args = parser.parse_args()

    harness.setup()
    from corpora.models import Corpus

    corpus = f"bench-documents-{args.documents}"
    harness.service_ensure(SERVICE)
    if args.rebuild and (removed := harness.corpus_remove(corpus)) is not None:
        print(f"removed the corpus {corpus} of an earlier run in {removed:.1f} s")
    if not Corpus.objects.filter(name=corpus).exists():
        corpus_id = corpus_build(corpus, args.documents)
        results_write(corpus_id, 1000)
    corpus_id = Corpus.objects.get(name=corpus).pk

    harness.quiet_wait(args.max_load, args.wait)
    measured = harness.quietly("pages", lambda: page_measure(corpus, args.repeat, args.explain), wait=args.wait)
    print(f"a page of 100 documents of {args.documents:,} (median and worst of {args.repeat}):")
    for label, median, worst, rows in measured:
        first = next(offset == 0 for shown, _status, _prefix, offset in PAGES if shown == label)
        verdict = ("met" if worst <= PAGE_TARGET_MS else "MISSED") if first else "no target"
        print(f"  {label:44} {median:7.1f} ms  worst {worst:7.1f} ms  {rows:3} rows  ({verdict})")
    if args.index_costs:
        harness.quiet_wait(args.max_load, args.wait)
        index_costs(corpus_id)
    print(f"end: {harness.load_line()}")


if __name__ == "__main__":
    main()
