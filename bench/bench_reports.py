"""Reports on 1,000,000 tex_to_html tasks and 10,000,000 log messages (issue "Reports").

Targets: category and what pages (from grains) p95 <= 50 ms, entry list p95 <= 100 ms, document
report <= 50 ms, runtime report <= 200 ms, one cold slice build <= 5 s, the global refresh <= 60 s, a
rerun of a what-class of 100,000 tasks <= 10 s. For comparison the category report is also computed
live with a plain GROUP BY over the task rows of messages (corpora_taskmessages: each task's classes and
their counts, unnested; neither tallies nor rollups), and the ratio live / grains is printed.

Data are generated in SQL by bench/reports_data.py into the dedicated database ccs_reports_bench and
reused by later runs (generation is timed separately); after the rerun the rerun tasks' messages,
runtimes and statuses are regenerated exactly, so the script can be run again. Before each measured
step the script waits until no other `bench_` process runs on this shared machine.

Run: .venv/bin/python bench/bench_reports.py [--tasks N] [--requests N] [--explain] [--skip-rerun] [--closed-run]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import harness  # bench/ is the script's directory

harness.configure("ccs_reports_bench", 9, Path("/tmp/ccs-reports-bench"))
BENCH_DB = harness.BENCH_DB
PG_SERVER = harness.PG_SERVER
ACTOR = harness.ACTOR
percentile = harness.percentile
fail = harness.fail
quietly = harness.quietly

import reports_data  # noqa: E402  (it imports Django lazily)

PAGE_TARGET_MS = {"category": 50.0, "what": 50.0, "entries": 100.0, "document": 50.0, "runtimes": 200.0}
COLD_BUILD_TARGET_S = 5.0
GLOBAL_REFRESH_TARGET_S = 60.0
RERUN_TARGET_S = 10.0


# --- set-up ----------------------------------------------------------------------------------------


def database_prepare(tasks: int) -> None:
    """Create the benchmark database if missing; drop and recreate it when it holds a partial build
    or one of another size (it is ours alone), so generation always starts from empty tables."""
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
    if exists:
        with psycopg.connect(f"{PG_SERVER}/{BENCH_DB}", autocommit=True) as conn:
            tables = {name for (name,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
            meta = None
            if "bench_reports_meta" in tables:
                row = conn.execute("SELECT value FROM bench_reports_meta WHERE key = 'complete'").fetchone()
                meta = row[0] if row else None
            partial = (
                "corpora_corpus" in tables
                and conn.execute("SELECT 1 FROM corpora_corpus WHERE name = %s", [reports_data.CORPUS]).fetchone()
            )
        if (meta and meta.get("tasks") == tasks) or (not meta and not partial):
            return
        print(f"dropping {BENCH_DB}: it holds {'a build of ' + str(meta.get('tasks')) if meta else 'a partial build'}")
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        if exists:
            conn.execute(f'DROP DATABASE "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def setup(tasks: int) -> None:
    """Database (see database_prepare), directories, Django and migrations."""
    database_prepare(tasks)
    harness.setup()


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


def explain(sql: str, params: Sequence[Any], *, title: str, rollback: bool = False) -> None:
    """Print EXPLAIN (ANALYZE, BUFFERS) of one statement (inside a rolled-back transaction if asked)."""
    from django.db import connection, transaction

    print(f"\nEXPLAIN (ANALYZE, BUFFERS) -- {title}")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, list(params))
        for (line,) in cursor.fetchall():
            print(f"    {line}")
        if rollback:
            transaction.set_rollback(True)


# --- the scenario ----------------------------------------------------------------------------------


@dataclass
class Pair:
    corpus_id: int
    service_id: int
    corpus: str = reports_data.CORPUS
    service: str = reports_data.SERVICE


def pair_get() -> Pair:
    from corpora.models import Corpus
    from services.models import Service

    return Pair(
        corpus_id=Corpus.objects.get(name=reports_data.CORPUS).pk,
        service_id=Service.objects.get(name=reports_data.SERVICE).pk,
    )


def cold_builds(pair: Pair) -> dict[str, tuple[float, int]]:
    """Clear the pair's grains, then build each severity's slice from nothing: seconds and rows."""
    from corpora.grains import grain_slice_rebuild, grains_clear
    from corpora.queries.reports import SEVERITIES

    grains_clear([(pair.corpus_id, pair.service_id)])
    builds = {}
    for severity in SEVERITIES:
        began = time.perf_counter()
        rows = grain_slice_rebuild(pair.corpus_id, pair.service_id, severity)
        builds[severity] = (time.perf_counter() - began, rows)
        print(f"  cold build {severity:<10} {builds[severity][0]:7.2f} s  ({rows:,} grain rows)", flush=True)
    return builds


def global_refresh() -> tuple[float, dict]:
    """The global refresh job, enqueued and run here as a worker would: seconds and its result."""
    from jobs.actions import job_enqueue
    from jobs.models import ACTIVE_STATES, Job, JobState
    from jobs.runner import job_run

    # A job left active by an interrupted earlier run would be reused by the debounce; end it.
    Job.objects.filter(kind="reports_refresh", state__in=ACTIVE_STATES).update(
        state=JobState.INTERRUPTED, debounce_key=None
    )
    began = time.perf_counter()
    job, _ = job_enqueue(kind="reports_refresh", actor=ACTOR, send=False)
    state = job_run(job.pk)
    seconds = time.perf_counter() - began
    job.refresh_from_db()
    if state != "succeeded":
        fail(f"the global refresh ended {state}: {job.message}")
    return seconds, job.result


def url_of(*parts: str) -> str:
    return "/api/" + "/".join(quote(part, safe="") for part in parts)


def page_sets(pair: Pair, tasks: int, requests: int) -> list[harness.PageSet]:
    """The URLs of every measured page, chosen from the data (grains, frame) so each answers 200."""
    from django.db import connection

    from corpora.models import ReportGrain
    from corpora.queries.reports import SEVERITIES

    grains = ReportGrain.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id)
    base = ("reports", pair.corpus, pair.service)

    category_urls = [url_of(*base, severity) for severity in SEVERITIES]

    what_urls = [
        url_of(*base, g.severity, g.category)
        for g in grains.filter(category__isnull=False, what__isnull=True).order_by("severity", "-task_count")
    ]

    special_tasks = tasks // 10
    # Half the entry-list requests walk the 100,000-task what-class from offset 0 to its last page.
    entry_urls = []
    spread = max(requests // 2, 2)
    last = min(special_tasks - 100, 100_000 - 100)
    for index in range(spread):
        offset = round(last * index / (spread - 1) / 100) * 100
        entry_urls.append(
            url_of(*base, "error", reports_data.SPECIAL_CATEGORY, reports_data.SPECIAL_WHAT) + f"?offset={offset}"
        )
    # The other half: the top what of each category of each severity, at offsets spread over its tasks.
    tops = []
    for severity in SEVERITIES:
        for category_grain in grains.filter(severity=severity, category__isnull=False, what__isnull=True):
            top = (
                grains.filter(severity=severity, category=category_grain.category, what__isnull=False)
                .order_by("-task_count")
                .first()
            )
            tops.append(top)
    for index in range(requests - spread):
        grain = tops[index % len(tops)]
        deepest = max(min(grain.task_count, 100_100) - 100, 0)
        fraction = ((index * 7) % 11) / 10
        offset = min(round(deepest * fraction / 100) * 100, deepest)
        entry_urls.append(url_of(*base, grain.severity, grain.category, grain.what) + f"?offset={offset}")

    with connection.cursor() as cursor:
        # Documents of every status, spread over the corpus.
        cursor.execute(
            "SELECT name FROM bench_reports_frame WHERE mod(i, %s) = 0 ORDER BY i LIMIT %s",
            [max(tasks // requests, 1) + 1, requests],
        )
        documents = [name for (name,) in cursor.fetchall()]
    document_urls = [url_of("corpus", pair.corpus, pair.service, "document", name) for name in documents]

    runtime_urls = [url_of("services", pair.service, "runtimes") + f"?offset={o}" for o in (0, 0, 100, 1000, 10_000)]

    def category_check(url: str, body: dict) -> str | None:
        return "computing" if body.get("computing") else (None if body.get("rows") else "no rows")

    def entries_check(url: str, body: dict) -> str | None:
        return None if body.get("entries") else "no entries"

    def document_check(url: str, body: dict) -> str | None:
        return None if body.get("messages") else "no messages"

    def runtime_check(url: str, body: dict) -> str | None:
        return None if body.get("count") == tasks and body.get("slowest") else f"count {body.get('count')}"

    return [
        harness.PageSet("category", category_urls, category_check),
        harness.PageSet("what", what_urls, category_check),
        harness.PageSet("entries", entry_urls, entries_check),
        harness.PageSet("document", document_urls, document_check),
        harness.PageSet("runtimes", runtime_urls, runtime_check),
    ]


# Every task row of the statuses, its classes and their message counts unnested: what the grains save.
LIVE_CATEGORY_SQL = """
SELECT c.category, count(DISTINCT x.task_id) AS tasks, sum(u.messages) AS messages
  FROM corpora_taskmessages x
 CROSS JOIN LATERAL unnest(x.classes, x.counts) AS u(class_id, messages)
  JOIN corpora_messageclass c ON c.id = u.class_id
 WHERE x.corpus_id = %s AND x.service_id = %s AND x.task_status = ANY(%s) AND c.severity = %s
 GROUP BY c.category
 ORDER BY tasks DESC, c.category
 LIMIT 100
"""


def live_compare(pair: Pair, severities: Sequence[str], runs: int) -> dict[str, tuple[float, float]]:
    """Median ms of the category report live (plain GROUP BY over the task rows) and from grains
    (category_report, the query function behind the page), per severity."""
    from django.db import connection

    from config.api.paging import Page
    from corpora.queries.corpora import pair_resolve
    from corpora.queries.reports import SEVERITIES, category_report

    page = Page(offset=0, page_size=100)
    results = {}
    for severity in severities:
        statuses, message_severity = SEVERITIES[severity]
        live = []
        for _ in range(runs):
            began = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute(LIVE_CATEGORY_SQL, [pair.corpus_id, pair.service_id, list(statuses), message_severity])
                rows = cursor.fetchall()
            live.append((time.perf_counter() - began) * 1000)
        grain = []
        for _ in range(max(runs, 20)):
            began = time.perf_counter()
            report = category_report(pair_resolve(pair.corpus, pair.service), severity, page)
            grain.append((time.perf_counter() - began) * 1000)
        if [r[0] for r in rows][:5] != [r.name for r in report.rows][:5]:
            fail(f"live and grain category reports differ for {severity}: {rows[:5]} / {report.rows[:5]}")
        results[severity] = (statistics.median(live), statistics.median(grain))
        print(
            f"  {severity:<10} live GROUP BY {results[severity][0]:9.1f} ms   grains {results[severity][1]:6.2f} ms"
            f"   ratio {results[severity][0] / results[severity][1]:8.0f}x",
            flush=True,
        )
    return results


def rerun_measure(pair: Pair, expected: int) -> tuple[float, dict, harness.PhaseLog]:
    """The rerun of the what-class holding `expected` error tasks: seconds, its answer, statements."""
    from corpora.actions.reports import rerun

    with harness.phases_recorded([]) as log:
        began = time.perf_counter()
        answer = rerun(
            corpus_name=pair.corpus,
            service_name=pair.service,
            actor=ACTOR,
            severity="error",
            category=reports_data.SPECIAL_CATEGORY,
            what=reports_data.SPECIAL_WHAT,
            description="bench_reports rerun",
        )
        seconds = time.perf_counter() - began
    if answer["tasks"] != expected:
        fail(f"the rerun reported {answer['tasks']} tasks, expected {expected}")
    return seconds, answer, log


# --- EXPLAIN of the queries behind missed targets ---------------------------------------------------


EXPLAINABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")
# CREATE TEMP TABLE ... AS a query is explained as well; with a column list (the message deleter's scratch
# table) it is run as it is.
CREATE_TEMP_AS = re.compile(r"CREATE TEMP TABLE [^(]*\bAS\b", re.IGNORECASE)


def explainable(sql: str) -> bool:
    text = " ".join(sql.split())
    return text.upper().startswith(EXPLAINABLE) or CREATE_TEMP_AS.match(text) is not None


def explain_calls(title: str, call: Callable[[], object], *, roll_back_call: bool = False) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of every statement a query function runs: the function is called once
    with its statements captured (inside a transaction rolled back afterwards if `roll_back_call`), then
    they are replayed in a rolled-back transaction, each query under EXPLAIN and every other statement
    (SET, ANALYZE, DROP, savepoints) as it is, so what is explained is always the code's own SQL."""
    from django.db import connection, transaction

    captured: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):  # noqa: ANN001, ANN202  (Django's wrapper signature)
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        if roll_back_call:
            with transaction.atomic():
                call()
                transaction.set_rollback(True)
        else:
            call()
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, params in captured:
            if not explainable(sql):
                cursor.execute(sql, params)
                continue
            print(f"\nEXPLAIN (ANALYZE, BUFFERS) -- {title}: {' '.join(sql.split())[:100]}")
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            for (line,) in cursor.fetchall():
                print(f"    {line}")
        transaction.set_rollback(True)


def explain_entry_list(pair: Pair, url: str) -> None:
    """EXPLAIN of the entry-list statements behind one measured URL (/api/reports/c/s/sev/category/what?offset=)."""
    from urllib.parse import unquote

    from config.api.paging import Page
    from corpora.queries.corpora import pair_resolve
    from corpora.queries.reports import entry_list

    path = url.partition("?")[0]
    severity, category, what = (unquote(part) for part in path.split("/")[5:8])
    offset = _offset(url)
    page = Page(offset, 100)
    explain_calls(
        f"entry_list {severity}/{category}/{what} offset {offset}",
        partial(entry_list, pair_resolve(pair.corpus, pair.service), severity, category, what, page),
    )


def explain_runtime(pair: Pair) -> None:
    from config.api.paging import Page
    from corpora.queries.reports import runtime_report

    explain_calls("runtime_report, slowest at offset 10000", partial(runtime_report, pair.service, Page(10_000, 100)))


def explain_slice_build(pair: Pair, severity: str) -> None:
    """EXPLAIN of a slice build's own statements (the build itself runs for real first: it only rebuilds
    the slice)."""
    from corpora.grains import grain_slice_rebuild

    explain_calls(
        f"grain_slice_rebuild {severity}", partial(grain_slice_rebuild, pair.corpus_id, pair.service_id, severity)
    )


def explain_grain_page(pair: Pair) -> None:
    explain(
        "SELECT * FROM corpora_reportgrain WHERE corpus_id = %s AND service_id = %s AND severity = 'error'"
        " AND category = 'undefined' AND what IS NOT NULL ORDER BY task_count DESC, what LIMIT 100",
        [pair.corpus_id, pair.service_id],
        title="what_report rows (error/undefined)",
    )


def explain_rerun(pair: Pair) -> None:
    """EXPLAIN of the rerun's own statements: the rerun is run and rolled back to capture them, then they
    are replayed in a rolled-back transaction. Rolled-back bulk DELETEs clear the visibility map of
    the pages they touch: the caller VACUUMs afterwards."""
    from corpora.actions.reports import rerun

    explain_calls(
        "rerun",
        partial(
            rerun, corpus_name=pair.corpus, service_name=pair.service, actor=ACTOR, severity="error",
            category=reports_data.SPECIAL_CATEGORY, what=reports_data.SPECIAL_WHAT, description="explain",
        ),
        roll_back_call=True,
    )  # fmt: skip


# --- main ------------------------------------------------------------------------------------------


def main() -> None:
    """Generate or reuse the data, then time slices, refresh, pages, live GROUP BY and the rerun."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000, help="documents (tex_to_html tasks)")
    parser.add_argument("--requests", type=int, default=120, help="timed requests per page kind")
    parser.add_argument("--live-runs", type=int, default=3, help="runs of each live GROUP BY")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN every query behind a target")
    parser.add_argument("--skip-rerun", action="store_true", help="leave the rerun out")
    parser.add_argument(
        "--closed-run", action="store_true",
        help="rerun with the pair's run closed; by default a run is open, which the rerun closes (and snapshots)",
    )  # fmt: skip
    parser.add_argument("--wait", type=float, default=7200, help="seconds to wait for other benchmarks at most")
    args = parser.parse_args()

    setup(args.tasks)
    from django.db import connection

    from accounts.actions import token_create
    from corpora.actions.reports import reports_rebuild_all

    state = reports_data.generated_state()
    if state:
        steps = state.get("steps", {})
        print(f"data: reused ({state['tasks']:,} tasks, {state['messages']:,} messages; built earlier in "
              f"{sum(steps.values()):.0f} s)")  # fmt: skip
    else:
        print(f"data: generating {args.tasks:,} tasks and {args.tasks * reports_data.MESSAGES_PER_TASK:,} messages")
        began = time.perf_counter()
        generation = reports_data.data_generate(args.tasks, ACTOR)
        print(f"data: generated in {time.perf_counter() - began:.1f} s ({generation.messages:,} messages)")
    restored = reports_data.data_restore()
    if restored:
        print(f"data: restored the tasks of an interrupted rerun ({sum(restored.values()):.1f} s)")
    elif state:
        # A settled database, whatever touched it since (a rolled-back bulk DELETE clears the visibility
        # map of every page it visited, and index-only scans then read the heap): autovacuum's work. The
        # small tables too: each earlier run rebuilt every grain twice and rewrote the runtime counts, and
        # without autovacuum their dead rows piled up (82,013 beside 6,063 grains after 14 runs).
        began = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                f"VACUUM (ANALYZE) corpora_task, {reports_data.MESSAGE_TABLES_SQL}, corpora_taskruntime,"
                " corpora_reportgrain, corpora_grainslice, corpora_runtimecount, corpora_runtimebin, corpora_taskcount"
            )
        print(f"data: VACUUM (ANALYZE) {time.perf_counter() - began:.1f} s (not measured)")
    pair = pair_get()
    with connection.cursor() as cursor:
        # The messages are the four tables of reports migration 0010 (corpora_logmessage is a view of them).
        cursor.execute(
            "SELECT t.name, pg_size_pretty(pg_total_relation_size(t.name::regclass))"
            " FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, o) ORDER BY t.o",
            [list(reports_data.MESSAGE_TABLES)],
        )
        table_sizes = cursor.fetchall()
        cursor.execute(
            "SELECT pg_size_pretty(sum(pg_total_relation_size(t.name::regclass))),"
            " pg_size_pretty(pg_database_size(current_database())) FROM unnest(%s::text[]) AS t(name)",
            [list(reports_data.MESSAGE_TABLES)],
        )
        messages_size, database_size = cursor.fetchone()
    print(f"sizes: messages {messages_size} (with indexes and TOAST: "
          f"{', '.join(f'{name} {size}' for name, size in table_sizes)}), database {database_size}")  # fmt: skip
    _, token = token_create(actor=ACTOR, created_by=ACTOR)

    print("\ncold slice builds (grains cleared first):")
    builds = quietly("cold slice builds", lambda: cold_builds(pair), wait=args.wait)
    worst = max(builds, key=lambda s: builds[s][0])

    print("\nglobal refresh (reports_refresh job, run in this process):")
    refresh_seconds, refresh_result = quietly("global refresh", global_refresh, wait=args.wait)
    print(f"  {refresh_seconds:.1f} s: {refresh_result}")

    print("\npages through the request stack (django.test.Client, one warming pass first):")
    sets = page_sets(pair, args.tasks, args.requests)
    for page_set in sets:
        quietly(
            f"{page_set.kind} pages", partial(harness.pages_measure, page_set, args.requests, token), wait=args.wait
        )
        t = page_set.timings
        print(
            f"  {page_set.kind:<9} x{len(t):4d} over {len(page_set.urls):3d} URLs: p50 {percentile(t, 0.5):7.1f} ms"
            f"  p95 {percentile(t, 0.95):7.1f} ms  max {max(t):7.1f} ms"
            f"  (target p95 <= {PAGE_TARGET_MS[page_set.kind]:.0f} ms: "
            f"{verdict(percentile(t, 0.95), PAGE_TARGET_MS[page_set.kind])})",
            flush=True,
        )
    entries = next(s for s in sets if s.kind == "entries")
    special = [ms for url, values in entries.by_url.items() if reports_data.SPECIAL_WHAT in _unquoted(url)
               for ms in values]  # fmt: skip
    deep = [ms for url, values in entries.by_url.items() if _offset(url) >= 50_000 for ms in values]
    shallow = [ms for url, values in entries.by_url.items() if _offset(url) < 1_000 for ms in values]
    for label, values in (("offset < 1000", shallow), ("offset >= 50000", deep), ("100k what-class", special)):
        if values:
            print(f"    entries {label:<16} x{len(values):4d}: p50 {percentile(values, 0.5):7.1f} ms"
                  f"  p95 {percentile(values, 0.95):7.1f} ms  max {max(values):7.1f} ms")  # fmt: skip

    print("\ncategory report live (plain GROUP BY over corpora_taskmessages) vs from grains (category_report):")
    severities = ["error", "warning", "fatal", "info"]
    live = quietly("live GROUP BY", lambda: live_compare(pair, severities, args.live_runs), wait=args.wait)
    category_p50 = percentile(next(s for s in sets if s.kind == "category").timings, 0.5)

    rerun_result = None
    if not args.skip_rerun:
        print("\nrerun of the what-class of error/undefined/\\bench@hundredk:")

        from corpora.pairs import run_open

        def rerun_once() -> tuple[float, dict, harness.PhaseLog]:
            # The steps before (data restore, VACUUM, the live GROUP BYs) leave dirty buffers and WAL that a
            # checkpoint would otherwise write back during the rerun: 4.8 s and 8.6 s for the same DELETE.
            began = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute("CHECKPOINT")
            checkpoint = time.perf_counter() - began
            if not args.closed_run:  # a rerun while the pair's run is open freezes it with a snapshot first
                run_open(corpus_id=pair.corpus_id, service_id=pair.service_id, owner=ACTOR, description="bench")
            seconds, answer, log = rerun_measure(pair, args.tasks // 10)
            print(f"  {seconds:.2f} s for {answer['tasks']:,} tasks (run {answer['run_id']};"
                  f" a CHECKPOINT before it took {checkpoint:.1f} s)")  # fmt: skip
            for line in harness.statement_lines(log.statements_over(0.01)):
                print(line)
            purge, purged = harness.retired_purge()
            print(f"  purge of the messages it retired (a background job): {purge:.2f} s for {purged:,} tasks")
            return seconds, answer, log

        def restore() -> None:
            began = time.perf_counter()
            restored = reports_data.data_restore()
            shown = ", ".join(f"{k} {v:.1f} s" for k, v in restored.items())
            print(f"  restored in {time.perf_counter() - began:.1f} s: {shown}")

        rerun_result = quietly("rerun", rerun_once, wait=args.wait, between=restore)[0]
        restore()
        began = time.perf_counter()
        reports_rebuild_all(progress=lambda *a: None, log=lambda line: None)
        print(f"  grains rebuilt in {time.perf_counter() - began:.1f} s (not measured)")

    print("\nsummary:")
    for page_set in sets:
        p95 = percentile(page_set.timings, 0.95)
        target = PAGE_TARGET_MS[page_set.kind]
        print(f"  {page_set.kind:<9} p50 {percentile(page_set.timings, 0.5):7.1f}  p95 {p95:7.1f}  max "
              f"{max(page_set.timings):7.1f} ms   target p95 <= {target:.0f} ms: {verdict(p95, target)}")  # fmt: skip
    build_seconds = builds[worst][0]
    print(f"  cold slice build, worst ({worst}) {build_seconds:.2f} s   target <= {COLD_BUILD_TARGET_S:.0f} s: "
          f"{verdict(build_seconds, COLD_BUILD_TARGET_S)}")  # fmt: skip
    print(f"  global refresh {refresh_seconds:.1f} s   target <= {GLOBAL_REFRESH_TARGET_S:.0f} s: "
          f"{verdict(refresh_seconds, GLOBAL_REFRESH_TARGET_S)}")  # fmt: skip
    if rerun_result is not None:
        print(f"  rerun of {args.tasks // 10:,} tasks {rerun_result:.2f} s   target <= {RERUN_TARGET_S:.0f} s: "
              f"{verdict(rerun_result, RERUN_TARGET_S)}")  # fmt: skip
    for severity, (live_ms, grain_ms) in live.items():
        print(f"  live/grains {severity:<8} {live_ms:8.1f} ms / {grain_ms:5.2f} ms = {live_ms / grain_ms:6.0f}x"
              f"   (live / category page p50 {category_p50:.1f} ms = {live_ms / category_p50:5.0f}x)")  # fmt: skip

    if harness.DISTURBED:
        print(f"  NOTE: measured while other benchmarks ran, after every retry: {', '.join(harness.DISTURBED)}")

    missed_pages = {s.kind for s in sets if percentile(s.timings, 0.95) > PAGE_TARGET_MS[s.kind]}
    harness.others_wait(args.wait)
    if args.explain or "entries" in missed_pages:
        entries = next(s for s in sets if s.kind == "entries")
        special = next(url for url in reversed(entries.urls) if reports_data.SPECIAL_WHAT in _unquoted(url))
        slowest = max(entries.by_url, key=lambda url: max(entries.by_url[url]))
        for url in dict.fromkeys([special, slowest]):
            explain_entry_list(pair, url)
    if args.explain or "runtimes" in missed_pages:
        explain_runtime(pair)
    if args.explain or missed_pages & {"category", "what"}:
        explain_grain_page(pair)
    if args.explain or build_seconds > COLD_BUILD_TARGET_S:
        explain_slice_build(pair, worst)
    if not args.skip_rerun and (args.explain or (rerun_result or 0) > RERUN_TARGET_S):
        explain_rerun(pair)
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM {reports_data.MESSAGE_TABLES_SQL}, corpora_taskruntime, corpora_task")


def _unquoted(url: str) -> str:
    from urllib.parse import unquote

    return unquote(url)


def _offset(url: str) -> int:
    return int(url.rsplit("offset=", 1)[1]) if "offset=" in url else 0


if __name__ == "__main__":
    main()
