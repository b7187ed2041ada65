"""Runs, snapshots, diffs and converter comparison on 1,000,000 tasks (issue "Runs", Speed).

Targets: a snapshot (corpora.pairs.snapshot_take) <= 10 s; the diff matrix of two snapshots
(GET /api/runs/{c}/{s}/diff on a pair never diffed, so the first call computes it) <= 2 s; a task-diff
page (GET /api/runs/{c}/{s}/tasks) <= 100 ms at any offset up to MAX_REPORT_OFFSET; the comparison
matrix of two services (GET /api/compare/{c}/{a}/{b}) <= 2 s; history pages (GET /api/runs,
/api/runs?corpus=, /api/runs/{c}/{s}) <= 50 ms with 10,000 runs. Also reported: the run close (which
snapshots), a snapshot's size on disk, the POST .../snapshot, a repeated diff call, compare task pages.

Corpus and tasks are generated in SQL by bench/runs_data.py and reused by later runs; the runs tables
are emptied at the start of each run. Every endpoint is requested through Django's full request stack
(django.test.Client). Before each measured step the script waits until no other `bench_` process runs
and the hypervisor leaves this VM its CPUs (harness.quietly).

Run: .venv/bin/python bench/bench_runs.py [--documents N] [--rounds N] [--history-runs N] [--explain]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import harness  # bench/ is the script's directory

harness.configure("ccs_runs_bench", 12, Path("/tmp/ccs-runs-bench"))
ACTOR = harness.ACTOR
percentile = harness.percentile
fail = harness.fail
quietly = harness.quietly

import runs_data  # noqa: E402  (it imports Django lazily)

SNAPSHOT_TARGET_S = 10.0
DIFF_TARGET_S = 2.0
TASK_PAGE_TARGET_MS = 100.0
COMPARE_TARGET_S = 2.0
HISTORY_TARGET_MS = 50.0
SNAPSHOTS_TAKEN = 3
PAGE_OFFSETS = (0, 1_000, 50_000, 100_000)


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


def url_of(*parts: str) -> str:
    return "/api/" + "/".join(quote(part, safe="") for part in parts)


@dataclass
class Ids:
    corpus: int
    service_a: int
    service_b: int


@dataclass
class Api:
    """GETs and POSTs through Django's whole request stack, each timed in ms and checked for its status."""

    token: str
    client: Any = None

    def __post_init__(self) -> None:
        from django.test import Client

        self.client = Client()

    def call(self, method: str, url: str, expected: int = 200) -> tuple[float, Any]:
        began = time.perf_counter()
        response = getattr(self.client, method)(url, HTTP_X_SERVICE_TOKEN=self.token)
        elapsed = (time.perf_counter() - began) * 1000
        if response.status_code != expected:
            fail(f"{method.upper()} {url} answered {response.status_code}: {response.content[:300]!r}")
        return elapsed, json.loads(response.content)


def machine_line(watch: harness.CpuWatch) -> str:
    return f"    [{watch.report()}; {harness.load_line()}]"


# --- snapshots -------------------------------------------------------------------------------------


def table_size(cursor: Any, table: str) -> int:
    cursor.execute("SELECT pg_total_relation_size(%s)", [table])
    return cursor.fetchone()[0]


def snapshots_measure(ids: Ids, api: Api, documents: int, wait: float) -> dict[str, Any]:
    """snapshot_take SNAPSHOTS_TAKEN times, the POST once, a run_close once; sizes before and after."""
    from django.db import connection

    from corpora.pairs import run_close, run_open, snapshot_take

    with connection.cursor() as cursor:
        size_before = table_size(cursor, "corpora_snapshot")
    takes: list[float] = []
    taken: list[int] = []
    for number in range(1, SNAPSHOTS_TAKEN + 1):

        def take(number: int = number) -> float:
            watch = harness.CpuWatch().start()
            with harness.timed() as timer:
                result = snapshot_take(corpus_id=ids.corpus, service_id=ids.service_a)
            if result.rows != documents:
                fail(f"the snapshot holds {result.rows} rows, expected {documents}")
            taken.append(result.snapshot_id)
            print(f"  snapshot_take {number}: {timer.seconds:6.2f} s ({result.rows:,} tasks)")
            print(machine_line(watch))
            return timer.seconds

        takes.append(quietly(f"snapshot {number}", take, wait=wait))

    def post() -> float:
        url = url_of("corpora", runs_data.CORPUS, "services", runs_data.SERVICE_A, "snapshot")
        elapsed, body = api.call("post", url, 202)
        if body["rows"] != documents:
            fail(f"the POST appended {body['rows']} rows, expected {documents}")
        print(f"  POST .../snapshot: {elapsed / 1000:6.2f} s")
        return elapsed / 1000

    post_seconds = quietly("snapshot POST", post, wait=wait)

    def close() -> float:
        run_open(corpus_id=ids.corpus, service_id=ids.service_a, owner=ACTOR, description="bench_runs close")
        watch = harness.CpuWatch().start()
        with harness.phases_recorded([]) as log, harness.timed() as timer:
            closed = run_close(corpus_id=ids.corpus, service_id=ids.service_a)
        if closed != 1:
            fail("run_close closed no run")
        print(f"  run_close: {timer.seconds:6.2f} s")
        for seconds, sql in [(s, q) for _, s, q in log.statements if s >= 0.005]:
            print(f"    {seconds:8.3f} s  {sql[:110]}")
        print(machine_line(watch))
        return timer.seconds

    close_seconds = quietly("run close", close, wait=wait)

    with connection.cursor() as cursor:
        size_after = table_size(cursor, "corpora_snapshot")
        cursor.execute(
            "SELECT count(*), sum(tasks), min(pg_column_size(document_ids)), max(pg_column_size(document_ids)),"
            " min(pg_column_size(statuses)), max(pg_column_size(statuses)) FROM corpora_snapshot"
            " WHERE corpus_id = %s AND service_id = %s",
            [ids.corpus, ids.service_a],
        )
        count, rows, ids_min, ids_max, statuses_min, statuses_max = cursor.fetchone()
        cursor.execute(
            "SELECT pg_relation_size('corpora_snapshot'), pg_total_relation_size(reltoastrelid)"
            " FROM pg_class WHERE relname = 'corpora_snapshot'"
        )
        heap, toast = cursor.fetchone()
    per_snapshot = (size_after - size_before) / count
    raw = 8 * documents + 2 * documents
    print(
        f"  sizes: document_ids {ids_min / 1e6:.2f}-{ids_max / 1e6:.2f} MB, statuses {statuses_min / 1e6:.2f}-"
        f"{statuses_max / 1e6:.2f} MB per snapshot (pg_column_size; {raw / 1e6:.1f} MB uncompressed);"
        f" corpora_snapshot grew {(size_after - size_before) / 1e6:.1f} MB for {count} snapshots"
        f" ({per_snapshot / 1e6:.2f} MB each; heap {heap / 1e3:.0f} kB, TOAST {toast / 1e6:.1f} MB)"
    )
    scale = 1_000_000 / documents
    return {
        "takes": takes,
        "post": post_seconds,
        "close": close_seconds,
        "base_id": taken[0],
        "column_mb": ((ids_max + statuses_max) / 1e6 * scale),
        "ids_mb": ids_max / 1e6 * scale,
        "statuses_mb": statuses_max / 1e6 * scale,
        "growth_mb": per_snapshot / 1e6 * scale,
        "rows": rows,
    }


# --- diffs -----------------------------------------------------------------------------------------


@dataclass
class DiffCase:
    label: str
    changed_percent: int
    keep_percent: int = 100  # the previous snapshot holds this share of the documents (an extend added the rest)
    first: list[float] = field(default_factory=list)
    repeated: list[float] = field(default_factory=list)
    dates: tuple[str, str] = ("", "")
    statements: list[tuple[float, str]] = field(default_factory=list)
    stored_mb: float = 0.0
    rows_first: float = 0.0  # seconds of the first task list, which writes the diff's changed documents


def diff_url(dates: tuple[str, str], kind: str = "diff", **extra: Any) -> str:
    query = {"previous": dates[0], "current": dates[1], **extra}
    return url_of("runs", runs_data.CORPUS, runs_data.SERVICE_A, kind) + "?" + urlencode(query)


def diff_measure(case: DiffCase, base_id: int, documents: int, api: Api, repeats: int) -> float:
    """Derive a fresh pair of snapshots (not timed), then GET its diff: the first call computes it, the
    repeated ones read it. Returns the first call's seconds."""
    keep = documents * case.keep_percent // 100
    if case.keep_percent < 100:
        previous = runs_data.snapshot_derived(base_id, changed_percent=0, keep=keep)
    else:
        previous = runs_data.snapshot_derived(base_id, changed_percent=0)
    current = runs_data.snapshot_derived(base_id, changed_percent=case.changed_percent)
    case.dates = (previous[1].isoformat(), current[1].isoformat())
    url = diff_url(case.dates)
    from django.db import connection

    with connection.cursor() as cursor:
        size_before = table_size(cursor, "corpora_taskdiff")
    watch = harness.CpuWatch().start()
    with harness.phases_recorded([]) as log:
        first, body = api.call("get", url)
    case.statements = [(s, q) for _, s, q in log.statements if s >= 0.005]
    expected = runs_data.changed_expected(keep, documents, case.changed_percent)
    if body["changed"] != expected or body["total"] != documents:
        fail(f"{case.label}: changed {body['changed']} (expected {expected}), total {body['total']}")
    case.first.append(first / 1000)
    again = [api.call("get", url)[0] for _ in range(repeats)]
    case.repeated = again
    # The first task list of the diff writes its changed documents' rows (corpora.actions.diffs.diff_rows_ensure).
    rows_first, _ = api.call("get", diff_url(case.dates, "tasks"))
    case.rows_first = rows_first / 1000
    with connection.cursor() as cursor:
        case.stored_mb = (table_size(cursor, "corpora_taskdiff") - size_before) / 1e6
    print(
        f"  {case.label:<44} first {first / 1000:6.2f} s   repeated p50 {statistics.median(again):6.1f} ms"
        f" max {max(again):6.1f} ms   ({body['changed']:,} changed, {len(body['matrix'])} cells;"
        f" first task list {case.rows_first:.2f} s; corpora_taskdiff grew {case.stored_mb:.1f} MB)"
    )
    for seconds, sql in case.statements:
        print(f"    {seconds:8.3f} s  {sql[:110]}")
    rest = first / 1000 - sum(seconds for _, seconds, _ in log.statements)
    print(f"    {rest:8.3f} s  the rest: the COMMIT, Python")
    print(machine_line(watch))
    return first / 1000


# --- task-diff pages, compare, history ------------------------------------------------------------


@dataclass
class PageSet:
    label: str
    urls: dict[str, str]  # label -> URL
    check: Callable[[str, list], str | None]
    by_url: dict[str, list[float]] = field(default_factory=dict)

    @property
    def timings(self) -> list[float]:
        return [ms for values in self.by_url.values() for ms in values]


def pages_measure(page_set: PageSet, api: Api, rounds: int) -> None:
    """One warming pass over the URLs, then `rounds` passes, each URL once per pass."""
    page_set.by_url.clear()
    for label, url in page_set.urls.items():
        _, body = api.call("get", url)
        problem = page_set.check(label, body)
        if problem:
            fail(f"GET {url}: {problem}")
    watch = harness.CpuWatch().start()
    for _ in range(rounds):
        for label, url in page_set.urls.items():
            page_set.by_url.setdefault(label, []).append(api.call("get", url)[0])
    print(machine_line(watch))


def print_pages(page_set: PageSet, target_ms: float | None) -> None:
    for label, values in page_set.by_url.items():
        verdict_text = f"  {verdict(percentile(values, 0.95), target_ms)}" if target_ms else ""
        print(f"    {label:<48} p50 {percentile(values, 0.5):7.1f}  p95 {percentile(values, 0.95):7.1f}"
              f"  max {max(values):7.1f} ms{verdict_text}")  # fmt: skip
    t = page_set.timings
    label = f"all ({len(t)} requests)"
    print(f"    {label:<48} p50 {percentile(t, 0.5):7.1f}  p95 {percentile(t, 0.95):7.1f}  max {max(t):7.1f} ms")


# Filters of the task-diff pages, and the percentage of the documents each keeps on the 100% diff (every
# status moved one step: no_problem (30%) -> warning, warning (35%) -> error, error (25%) -> fatal are
# regressions; fatal -> invalid has the same rank, invalid -> no_problem is better).
TASK_FILTERS = {
    "unfiltered": ({}, 100),
    "no_problem -> warning": ({"previous_status": "no_problem", "current_status": "warning"}, 30),
    "current warning": ({"current_status": "warning"}, 30),
    "regressed": ({"change": "regressed"}, 90),
}


def task_page_set(dates: tuple[str, str], documents: int) -> PageSet:
    urls = {}
    for name, (query, _) in TASK_FILTERS.items():
        for offset in PAGE_OFFSETS:
            urls[f"{name} @ offset {offset:,}"] = diff_url(dates, "tasks", offset=offset, **query)

    def check(label: str, body: list) -> str | None:
        name, _, offset = label.partition(" @ offset ")
        query, percent = TASK_FILTERS[name]
        rows = max(0, min(100, documents * percent // 100 - int(offset.replace(",", ""))))
        if len(body) != rows:
            return f"{len(body)} rows, expected {rows}"
        for row in body:
            if query.get("previous_status", row["previous_status"]) != row["previous_status"]:
                return f"row {row} outside the filter"
            if query.get("current_status", row["current_status"]) != row["current_status"]:
                return f"row {row} outside the filter"
            if query.get("change") and not row["regression"]:
                return f"row {row} is no regression"
        return None

    return PageSet("task-diff pages", urls, check)


def history_page_set() -> PageSet:
    big_corpus, big_service = runs_data.history_pair(0, runs_data.SERVICE_A)
    open_corpus = f"{runs_data.HISTORY_PREFIX}{runs_data.HISTORY_CORPORA - 1:02d}"
    urls = {
        "/api/runs": "/api/runs",
        "/api/runs?limit=500": "/api/runs?limit=500",
        f"/api/runs?corpus={big_corpus}": f"/api/runs?corpus={big_corpus}",
        f"/api/runs?corpus={open_corpus}&service=..next": (
            f"/api/runs?corpus={open_corpus}&service={runs_data.SERVICE_B}"
        ),
        f"/api/runs?owner={ACTOR}": f"/api/runs?owner={ACTOR}",
        f"/api/runs/{big_corpus}/{big_service}": url_of("runs", big_corpus, big_service),
        f"/api/runs/{runs_data.CORPUS}/{runs_data.SERVICE_A}": url_of("runs", runs_data.CORPUS, runs_data.SERVICE_A),
        f"/api/runs/{big_corpus}/{big_service}/current": url_of("runs", big_corpus, big_service, "current"),
    }

    def check(label: str, body: Any) -> str | None:
        if label.endswith("/current"):
            return None if body and body["open"] else "no open run"
        if not body:
            return "no runs"
        limit = 500 if "limit=500" in label else 100
        if len(body) > limit or (label in ("/api/runs", "/api/runs?limit=500") and len(body) != limit):
            return f"{len(body)} runs, expected {limit}"
        return None

    return PageSet("history pages", urls, check)


def compare_measure(api: Api, repeats: int, documents: int, expected_differ: int) -> list[float]:
    url = url_of("compare", runs_data.CORPUS, runs_data.SERVICE_A, runs_data.SERVICE_B)
    watch = harness.CpuWatch().start()
    timings = []
    for _ in range(repeats):
        elapsed, body = api.call("get", url)
        if body["differ"] != expected_differ or body["total"] != documents:
            fail(f"compare: {body['differ']} differ, expected {expected_differ}")
        timings.append(elapsed / 1000)
    print(f"  GET {url}: " + ", ".join(f"{s:.2f}" for s in timings) + " s")
    print(machine_line(watch))
    return timings


def compare_pages_measure(api: Api, repeats: int, differ: int) -> dict[int, list[float]]:
    results = {}
    watch = harness.CpuWatch().start()
    for offset in (0, 100_000):
        url = url_of("compare", runs_data.CORPUS, runs_data.SERVICE_A, runs_data.SERVICE_B, "tasks")
        url += f"?offset={offset}"
        timings = []
        for _ in range(repeats):
            elapsed, body = api.call("get", url)
            if len(body) != max(0, min(100, differ - offset)):
                fail(f"GET {url}: {len(body)} rows, expected {max(0, min(100, differ - offset))}")
            timings.append(elapsed)
        results[offset] = timings
        print(f"  GET {url}: " + ", ".join(f"{ms:.0f}" for ms in timings) + " ms")
    print(machine_line(watch))
    return results


# --- EXPLAIN ---------------------------------------------------------------------------------------


EXPLAINABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")


def explain_calls(title: str, call: Callable[[], object]) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of every statement `call` runs, replayed in a rolled-back transaction
    (the call itself runs first, for real, inside a transaction that is rolled back too)."""
    from django.db import connection, transaction

    captured: list[tuple[str, Any]] = []

    def capture(execute, sql, params, many, context):  # noqa: ANN001, ANN202  (Django's wrapper signature)
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with transaction.atomic():
        with connection.execute_wrapper(capture):
            call()
        transaction.set_rollback(True)
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, params in captured:
            if not sql.lstrip().upper().startswith(EXPLAINABLE):
                cursor.execute(sql, params)
                continue
            print(f"\nEXPLAIN (ANALYZE, BUFFERS) -- {title}: {' '.join(sql.split())[:100]}")
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            for (line,) in cursor.fetchall():
                print(f"    {line}")
        transaction.set_rollback(True)


def explain_url(api: Api, url: str) -> None:
    explain_calls(f"GET {url[:90]}", lambda: api.call("get", url))


# --- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000, help="documents (tasks per service)")
    parser.add_argument("--rounds", type=int, default=20, help="timed passes over each set of page URLs")
    parser.add_argument("--repeats", type=int, default=5, help="repeated diff and compare calls")
    parser.add_argument("--history-runs", type=int, default=10_000, help="runs in the history")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN the statements behind every target")
    parser.add_argument("--wait", type=float, default=7200, help="seconds to wait for other benchmarks at most")
    args = parser.parse_args()

    harness.setup()
    from django.db import connection

    from corpora.models import Corpus

    state = runs_data.generated_state()
    if state and state.get("documents") != args.documents:
        print(f"data: removing a build of {state.get('documents'):,} documents")
        runs_data.leftovers_remove()
        state = None
    if state:
        print(f"data: reused ({state['documents']:,} documents; built earlier in {sum(state['steps'].values()):.0f} s)")
    else:
        if Corpus.objects.filter(name=runs_data.CORPUS).exists():
            print("data: removing a partial build")
            runs_data.leftovers_remove()
        print(f"data: generating {args.documents:,} documents and {2 * args.documents:,} tasks")
        with harness.timed() as timer:
            runs_data.data_generate(args.documents, ACTOR)
        print(f"data: generated in {timer.seconds:.1f} s")
    runs_data.runs_truncate()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_task, corpora_document, corpora_taskcount")
    a_id, b_id = runs_data.services_ensure(ACTOR)
    ids = Ids(Corpus.objects.get(name=runs_data.CORPUS).pk, a_id, b_id)
    api = Api(harness.bench_token())
    print(f"start: {harness.load_line()}")

    print(f"\nsnapshots of {args.documents:,} tasks:")
    snaps = snapshots_measure(ids, api, args.documents, args.wait)

    print(f"\nhistory: {args.history_runs:,} runs generated (not measured): ", end="")
    print(runs_data.history_generate(args.history_runs, (a_id, b_id), ACTOR))
    history = history_page_set()
    quietly("history pages", lambda: pages_measure(history, api, args.rounds * 5), wait=args.wait)
    print_pages(history, HISTORY_TARGET_MS)

    print("\ndiff matrices, GET /api/runs/{c}/{s}/diff on a fresh pair of snapshots (first call computes it):")
    cases = [
        DiffCase("same documents, no status changed", 0),
        DiffCase("same documents, 10% changed", 10),
        DiffCase("same documents, 100% changed", 100),
        DiffCase("2% documents added (extend), 10% changed", 10, keep_percent=98),
    ]
    for case in cases:
        quietly(case.label, lambda c=case: diff_measure(c, snaps["base_id"], args.documents, api, args.repeats),
                wait=args.wait)  # fmt: skip

    every = next(c for c in cases if c.changed_percent == 100)
    print(f"\ntask-diff pages on the 100% diff ({args.rounds} passes, its rows written, not vacuumed):")
    tasks = task_page_set(every.dates, args.documents)
    quietly("task-diff pages", lambda: pages_measure(tasks, api, args.rounds), wait=args.wait)
    print_pages(tasks, TASK_PAGE_TARGET_MS)

    differ = args.documents * runs_data.B_DIFFER_PERCENT // 100
    print(f"\ncomparison of {runs_data.SERVICE_A} and {runs_data.SERVICE_B} ({differ:,} documents differ):")
    compare = quietly(
        "compare matrix", lambda: compare_measure(api, args.repeats, args.documents, differ), wait=args.wait
    )
    compare_pages = quietly("compare pages", lambda: compare_pages_measure(api, 3, differ), wait=args.wait)

    print("\nsummary:")
    worst_take = max(snaps["takes"])
    print(f"  snapshot_take {', '.join(f'{s:.2f}' for s in snaps['takes'])} s   target <= {SNAPSHOT_TARGET_S:.0f} s: "
          f"{verdict(worst_take, SNAPSHOT_TARGET_S)}")  # fmt: skip
    print(f"  POST .../snapshot {snaps['post']:.2f} s, run_close {snaps['close']:.2f} s")
    print(f"  snapshot size per million tasks: columns {snaps['column_mb']:.2f} MB (document_ids {snaps['ids_mb']:.2f}"
          f" + statuses {snaps['statuses_mb']:.2f}), table growth {snaps['growth_mb']:.2f} MB")  # fmt: skip
    for case in cases:
        repeated, first, target = statistics.median(case.repeated), case.first[-1], DIFF_TARGET_S
        print(f"  diff {case.label:<44} first {first:.2f} s, repeated p50 {repeated:.1f} ms, first task list"
              f" {case.rows_first:.2f} s, stored {case.stored_mb:.1f} MB  target <= {target:.0f} s:"
              f" {verdict(first, target)}")  # fmt: skip
    t = tasks.timings
    worst_task = max(percentile(v, 0.95) for v in tasks.by_url.values())
    print(f"  task-diff pages p50 {percentile(t, 0.5):.1f} ms, p95 {percentile(t, 0.95):.1f} ms, worst URL p95"
          f" {worst_task:.1f} ms, max {max(t):.1f} ms   target <= {TASK_PAGE_TARGET_MS:.0f} ms: "
          f"{verdict(worst_task, TASK_PAGE_TARGET_MS)}")  # fmt: skip
    print(f"  compare matrix {', '.join(f'{s:.2f}' for s in compare)} s   target <= {COMPARE_TARGET_S:.0f} s: "
          f"{verdict(max(compare), COMPARE_TARGET_S)}")  # fmt: skip
    for offset, values in compare_pages.items():
        print(f"  compare tasks offset {offset:,}: median {statistics.median(values):.0f} ms (no target)")
    # Pages of the default size (100 runs) against the target; the largest page (limit=500) reported beside.
    default = {label: values for label, values in history.by_url.items() if "limit=500" not in label}
    h = [ms for values in default.values() for ms in values]
    worst_history = max(percentile(v, 0.95) for v in default.values())
    print(f"  history pages of 100 runs p50 {percentile(h, 0.5):.1f} ms, p95 {percentile(h, 0.95):.1f} ms, worst URL"
          f" p95 {worst_history:.1f} ms   target <= {HISTORY_TARGET_MS:.0f} ms: "
          f"{verdict(worst_history, HISTORY_TARGET_MS)}")  # fmt: skip
    largest = history.by_url["/api/runs?limit=500"]
    largest_p95 = percentile(largest, 0.95)
    print(f"  history page of 500 runs p50 {percentile(largest, 0.5):.1f} ms, p95 {largest_p95:.1f} ms"
          f"   (target <= {HISTORY_TARGET_MS:.0f} ms: {verdict(largest_p95, HISTORY_TARGET_MS)})")  # fmt: skip
    if harness.DISTURBED:
        print(f"  NOTE: measured while other benchmarks ran, after every retry: {', '.join(harness.DISTURBED)}")

    if args.explain or worst_task > TASK_PAGE_TARGET_MS:
        for label, values in tasks.by_url.items():
            if args.explain or percentile(values, 0.95) > TASK_PAGE_TARGET_MS:
                explain_url(api, tasks.urls[label])
    if args.explain or worst_history > HISTORY_TARGET_MS:
        for label, values in default.items():
            if args.explain or percentile(values, 0.95) > HISTORY_TARGET_MS:
                explain_url(api, history.urls[label])
    for case in cases:
        if args.explain or case.first[-1] > DIFF_TARGET_S:
            keep = args.documents * case.keep_percent // 100 if case.keep_percent < 100 else None
            previous = runs_data.snapshot_derived(snaps["base_id"], changed_percent=0, keep=keep)
            current = runs_data.snapshot_derived(snaps["base_id"], changed_percent=case.changed_percent)
            explain_url(api, diff_url((previous[1].isoformat(), current[1].isoformat())))
    if args.explain or max(compare) > COMPARE_TARGET_S:
        explain_url(api, url_of("compare", runs_data.CORPUS, runs_data.SERVICE_A, runs_data.SERVICE_B))
    if args.explain or worst_take > SNAPSHOT_TARGET_S:
        from corpora.pairs import snapshot_take

        explain_calls("snapshot_take", lambda: snapshot_take(corpus_id=ids.corpus, service_id=ids.service_a))


if __name__ == "__main__":
    main()
