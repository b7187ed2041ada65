"""Every report page and bulk operation at arXiv's size: 2,800,000 tex_to_html tasks with about 150 log
messages each, 420 million messages (issue #25).

The data set (bench/scale_data.py) is built set-based in SQL into the database ccs_scale_bench, in the
shape of real conversions (bench/message_shape.py: the sample corpus converted once, its class mix,
messages per task and details lengths, scaled to `--messages-per-task`), and reused by later runs with
the same options (the table scale_made records them). Before building, the free disk space is checked
against an estimate of the data set (scale_data.estimate_bytes); `--drop` drops the database.

Measured, each step once no other `bench_` process runs and the hypervisor leaves the VM its CPUs
(harness.quietly), the figures in the JSON object that `--json` prints on the last line:

- sizes: `message_bytes`, every table and index holding messages or message classes (corpora_messageclass,
  corpora_taskmessages, corpora_taskclass, corpora_messagetally; pg_total_relation_size, so TOAST and
  indexes included), `bytes_per_message` (message_bytes / messages), `database_bytes` (pg_database_size);
- `p95_ms`, per page, p95 over `--requests` GETs through Django's whole request stack (django.test.Client,
  the API views and the project's query functions behind them; one warming pass first, which also builds
  the report slices): `category` (/api/reports/C/S/<severity>, every severity), `what` (every category of
  every severity), `entries` (the top what of each category at offsets spread up to MAX_REPORT_OFFSET, and
  the rerun's what-class), `document` (documents spread over the corpus), `runtimes`
  (/api/services/S/runtimes at offsets 0 to 10,000), `corpus_detail` (/api/corpora/C), `run_history`
  (/api/runs, filtered by corpus, the pair's runs, its open run), `status` (/api/status, /api/statistics
  and the pair's overview /api/reports/C/S); `p50_ms` likewise;
- `seconds`, per operation: `cold_slice_build_info` (the pair's grains cleared, then
  corpora.grains.grain_slice_rebuild of the worst severity, info; the others are printed), `global_refresh`
  (corpora.actions.reports.reports_rebuild_all), `rerun` (corpora.actions.reports.rerun of the what-class of
  `--rerun-tasks` error tasks, 100,000; afterwards its tasks get back their messages, runtimes and status, so the
  data set is reused), `snapshot` (corpora.pairs.snapshot_take of every task of the pair), `diff_matrix`
  (corpora.actions.diffs.diff_ensure of the snapshot before and one after the rerun: the first computation),
  `sandbox_carve_info` and `sandbox_carve_error` (corpora.actions.corpora.corpus_sandbox with per_class_limit=5 and
  its job; the sandbox is deleted afterwards), `activation` (a second service activated on every document:
  corpora.actions.corpora.service_activate and its job; its tasks and runs are removed afterwards);
- `generation`: whether the data set was reused, how long it took to build (in the run that built it),
  and its speed in tasks and messages per second.

Two measurements of issue #25 have scripts of their own and are not repeated here: ingestion of results
with 150 messages each (bench_dispatcher.py --messages-per-result 150) and the import of 2.8M arXiv-style
entries (bench_import.py --arxiv).

With small data sets (at most 100,000 tasks, or with `--check`) the data are checked after generation and
again at the end: tallies equal the recount from the task rows, (task, class) rows equal the task rows'
classes, the task counts a count, and some tasks read back as their template's messages.

Run: .venv/bin/python bench/bench_scale.py [--tasks 2800000] [--messages-per-task 150] [--rerun-tasks 100000]
     [--requests 100] [--check] [--json] [--wait S] [--drop]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import harness  # bench/ is the script's directory

harness.configure("ccs_scale_bench", 15, Path("/tmp/ccs-scale-bench"))
ACTOR = harness.ACTOR
percentile = harness.percentile
fail = harness.fail

import message_shape  # noqa: E402
import scale_data  # noqa: E402

CHECK_UP_TO = 100_000  # tasks: data sets up to this size are checked whole after generation and at the end
PER_CLASS_LIMIT = 5
SANDBOX = "bench-scale-sandbox"
ACTIVATION_SERVICE = "bench-scale-activation"


def say(text: str = "") -> None:
    print(text, flush=True)


# --- the database -------------------------------------------------------------------------------------


def server() -> Any:
    import psycopg

    return psycopg.connect(f"{harness.PG_SERVER}/postgres", autocommit=True)


def database_drop() -> None:
    """--drop: the benchmark database and with it the data set."""
    with server() as conn:
        row = conn.execute("SELECT pg_database_size(%s) FROM pg_database WHERE datname = %s",
                           [harness.BENCH_DB, harness.BENCH_DB]).fetchone()  # fmt: skip
        if row is None:
            say(f"{harness.BENCH_DB}: no such database, nothing to drop")
            return
        conn.execute(f'DROP DATABASE "{harness.BENCH_DB}" WITH (FORCE)')
    say(f"dropped the database {harness.BENCH_DB} ({row[0] / 1e9:.2f} GB)")


def free_bytes(conn: Any) -> tuple[str, int]:
    """The server's data directory and the free bytes of its file system (the server runs on this machine)."""
    directory = conn.execute("SHOW data_directory").fetchone()[0]
    path = directory if os.path.exists(directory) else str(harness.BENCH_ROOT.parent)
    return directory, shutil.disk_usage(path).free


def database_prepare(options: scale_data.Options) -> bool:
    """Keep the database when it holds a complete data set of these options (True: reuse); else check the
    disk, then drop and create it empty (False: generate)."""
    import psycopg

    with server() as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [harness.BENCH_DB]).fetchone()
        old_bytes = 0
        if exists:
            with psycopg.connect(f"{harness.PG_SERVER}/{harness.BENCH_DB}", autocommit=True) as bench:
                state = scale_data.made_state(bench)
                old_bytes = bench.execute("SELECT pg_database_size(current_database())").fetchone()[0]
            if state and state["complete"] and state["options"] == options.as_json():
                return True
            held = "an incomplete build" if state and not state["complete"] else "another build"
            if state and state["complete"]:
                held = f"a build with other options ({state['options']})"
            say(f"{harness.BENCH_DB} holds {held}: it is dropped and built again")
        directory, free = free_bytes(conn)
        need = scale_data.estimate_bytes(options.tasks, options.messages_per_task)
        if need > (free + old_bytes) * 0.95:
            fail(
                f"the data set of {options.tasks:,} tasks x {options.messages_per_task:g} messages needs about"
                f" {need / 1e9:.1f} GB, and the file system of {directory} has {free / 1e9:.1f} GB free"
                f"{f' (+{old_bytes / 1e9:.1f} GB of the old data set)' if old_bytes else ''}: free some space,"
                " or choose fewer --tasks or --messages-per-task"
            )
        say(f"disk: the data set may take up to {need / 1e9:.1f} GB; {free / 1e9:.1f} GB free under {directory}")
        if exists:
            conn.execute(f'DROP DATABASE "{harness.BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{harness.BENCH_DB}"')
    return False


# --- pages --------------------------------------------------------------------------------------------


def url_of(*parts: str) -> str:
    return "/api/" + "/".join(quote(part, safe="") for part in parts)


def spread(total: int, count: int, step: int = 100) -> list[int]:
    """`count` offsets from 0 to the last full page of `total` rows (capped at MAX_REPORT_OFFSET)."""
    from config.live import get_config  # after harness.configure, which the settings read

    last = max(min(total - step, get_config().MAX_REPORT_OFFSET), 0)
    if count <= 1 or last == 0:
        return [0]
    return sorted({round(last * n / (count - 1) / step) * step for n in range(count)})


def page_sets(pair: tuple[int, int], tasks: int, rerun_tasks: int, requests: int) -> list[harness.PageSet]:
    """The URLs of every measured page, chosen from the data (grains, frame) so each answers 200."""
    from django.db import connection

    from corpora.models import ReportGrain
    from corpora.queries.reports import SEVERITIES

    corpus, service = scale_data.CORPUS, scale_data.SERVICE
    grains = ReportGrain.objects.filter(corpus_id=pair[0], service_id=pair[1])
    base = ("reports", corpus, service)

    category_urls = [url_of(*base, severity) for severity in SEVERITIES]
    what_urls = [
        url_of(*base, g.severity, g.category)
        for g in grains.filter(category__isnull=False, what__isnull=True).order_by("severity", "-task_count")
    ]

    entry_urls = []
    tops = []
    for g in grains.filter(category__isnull=False, what__isnull=True).order_by("severity", "-task_count"):
        top = grains.filter(severity=g.severity, category=g.category, what__isnull=False).order_by("-task_count")
        tops.append(top.first())
    per_top = max(requests // max(len(tops), 1), 3)
    for grain in tops:
        for offset in spread(grain.task_count, per_top):
            entry_urls.append(url_of(*base, grain.severity, grain.category, grain.what) + f"?offset={offset}")
    if rerun_tasks:
        for offset in spread(rerun_tasks, per_top):
            special = url_of(*base, "error", scale_data.SPECIAL_CATEGORY, scale_data.SPECIAL_WHAT)
            entry_urls.append(f"{special}?offset={offset}")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'p' || lpad(i::text, 8, '0') FROM scale_frame WHERE i %% %s = 0 ORDER BY i LIMIT %s",
            [max(tasks // requests, 1), requests],
        )
        documents = [name for (name,) in cursor.fetchall()]
    document_urls = [url_of("corpus", corpus, service, "document", name) for name in documents]

    offsets = [o for o in (0, 100, 1000, 10_000) if o == 0 or o + 100 <= tasks]
    runtime_urls = [url_of("services", service, "runtimes") + f"?offset={o}" for o in offsets]
    detail_urls = [url_of("corpora", corpus)]
    history_urls = ["/api/runs", f"/api/runs?corpus={quote(corpus)}", url_of("runs", corpus, service),
                    url_of("runs", corpus, service, "current")]  # fmt: skip
    status_urls = ["/api/status", "/api/statistics", url_of("reports", corpus, service)]

    def category_check(url: str, body: Any) -> str | None:
        return "still computing" if body.get("computing") else None

    def rows_check(url: str, body: Any) -> str | None:
        return "still computing" if body.get("computing") else (None if body.get("rows") else "no rows")

    def entries_check(url: str, body: Any) -> str | None:
        return None if body.get("entries") else "no entries"

    def document_check(url: str, body: Any) -> str | None:
        return None if body.get("messages") else "no messages"

    def runtime_check(url: str, body: Any) -> str | None:
        return None if body.get("count") == tasks and body.get("slowest") else f"count {body.get('count')}"

    def detail_check(url: str, body: Any) -> str | None:
        return None if body.get("documents") == tasks else f"documents {body.get('documents')}"

    def any_check(url: str, body: Any) -> str | None:
        return None

    return [
        harness.PageSet("category", category_urls, category_check),
        harness.PageSet("what", what_urls, rows_check),
        harness.PageSet("entries", entry_urls, entries_check),
        harness.PageSet("document", document_urls, document_check),
        harness.PageSet("runtimes", runtime_urls, runtime_check),
        harness.PageSet("corpus_detail", detail_urls, detail_check),
        harness.PageSet("run_history", history_urls, any_check),
        harness.PageSet("status", status_urls, any_check),
    ]


# --- operations ---------------------------------------------------------------------------------------


def cold_builds(pair: tuple[int, int]) -> dict[str, float]:
    """Clear the pair's grains, then build each severity's slice from nothing: seconds each."""
    from corpora.grains import grain_slice_rebuild, grains_clear
    from corpora.queries.reports import SEVERITIES

    grains_clear([pair])
    builds = {}
    for severity in SEVERITIES:
        began = time.perf_counter()
        rows = grain_slice_rebuild(pair[0], pair[1], severity)
        builds[severity] = time.perf_counter() - began
        say(f"  cold build {severity:<10} {builds[severity]:8.3f} s  ({rows:,} grain rows)")
    return builds


def global_refresh() -> float:
    from corpora.actions.reports import reports_rebuild_all

    began = time.perf_counter()
    result = reports_rebuild_all(progress=lambda *_: None, log=lambda _: None)
    seconds = time.perf_counter() - began
    say(f"  {seconds:.2f} s: {result}")
    return seconds


def snapshot(pair: tuple[int, int], tasks: int) -> tuple[float, int]:
    """snapshot_take of every task of the pair: (seconds, snapshot id)."""
    from corpora.pairs import snapshot_take

    began = time.perf_counter()
    taken = snapshot_take(corpus_id=pair[0], service_id=pair[1])
    seconds = time.perf_counter() - began
    if taken.rows != tasks:
        fail(f"the snapshot holds {taken.rows} tasks, expected {tasks}")
    say(f"  snapshot_take: {seconds:.2f} s ({taken.rows:,} tasks)")
    return seconds, taken.snapshot_id


# The last purge's seconds (rerun_once runs it after the rerun it measures).
PURGE: dict[str, float] = {}


def rerun_once(pair: tuple[int, int], expected: int) -> float:
    """A CHECKPOINT first (not measured: the writes before would otherwise be written back during the
    rerun), then corpora.actions.reports.rerun of the what-class, with its statements printed."""
    from django.db import connection

    from corpora.actions.reports import rerun

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    with harness.phases_recorded([]) as log:
        began = time.perf_counter()
        answer = rerun(
            corpus_name=scale_data.CORPUS, service_name=scale_data.SERVICE, actor=ACTOR, severity="error",
            category=scale_data.SPECIAL_CATEGORY, what=scale_data.SPECIAL_WHAT, description="bench_scale rerun",
        )  # fmt: skip
        seconds = time.perf_counter() - began
    if answer["tasks"] != expected:
        fail(f"the rerun set {answer['tasks']} tasks TODO, expected {expected}")
    say(f"  rerun: {seconds:.2f} s for {answer['tasks']:,} tasks")
    for line in harness.statement_lines(log.statements_over(0.01)):
        say(line)
    PURGE["rerun_purge"], purged = harness.retired_purge()
    say(f"  purge of the messages it retired (a background job): {PURGE['rerun_purge']:.2f} s for {purged:,} tasks")
    return seconds


def restore(pair: tuple[int, int]) -> None:
    began = time.perf_counter()
    steps = scale_data.data_restore(*pair)
    shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in steps.items()) or "nothing to restore"
    say(f"  restored in {time.perf_counter() - began:.1f} s (not measured): {shown}")


def diff_once(previous_id: int, current_id: int, expected: int) -> float:
    from corpora.actions.diffs import diff_ensure
    from corpora.models import SnapshotDiff

    began = time.perf_counter()
    diff_id = diff_ensure(previous_id=previous_id, current_id=current_id)
    seconds = time.perf_counter() - began
    diff = SnapshotDiff.objects.get(pk=diff_id)
    if diff.changed != expected:
        fail(f"the diff counts {diff.changed} changed tasks, expected {expected}")
    say(f"  diff matrix: {seconds:.3f} s ({diff.changed:,} changed, {len(diff.matrix)} cells)")
    return seconds


def diff_forget(previous_id: int, current_id: int) -> None:
    from corpora.models import SnapshotDiff

    SnapshotDiff.objects.filter(previous_id=previous_id, current_id=current_id).delete()


def sandbox_carve(severity: str) -> float:
    """A sandbox of the pair's tasks of `severity`, per_class_limit=5, through the API's action and its
    job (timed), checked and deleted (not timed)."""
    from corpora.actions.corpora import corpus_delete, corpus_sandbox
    from corpora.models import Corpus
    from jobs.runner import job_run

    if Corpus.objects.filter(name=SANDBOX).exists():
        corpus_delete(name=SANDBOX, confirm=SANDBOX, actor=ACTOR)
    job = corpus_sandbox(
        parent=scale_data.CORPUS, actor=ACTOR, send=False, name=SANDBOX, service=scale_data.SERVICE,
        severity=severity, per_class_limit=PER_CLASS_LIMIT,
    )  # fmt: skip
    began = time.perf_counter()
    job_run(job.pk)
    seconds = time.perf_counter() - began
    job.refresh_from_db()
    if job.state != "succeeded":
        fail(f"the carve of {severity} ended {job.state}: {job.message}")
    documents = job.result["documents"]
    classes = _classes_of(severity)
    if not 0 < documents <= classes * PER_CLASS_LIMIT:
        fail(f"the carve of {severity} took {documents} documents for {classes} classes")
    began = time.perf_counter()
    corpus_delete(name=SANDBOX, confirm=SANDBOX, actor=ACTOR)
    say(f"  sandbox {severity}, per_class_limit={PER_CLASS_LIMIT}: {seconds:.2f} s ({documents:,} documents for"
        f" {classes:,} classes; deleted in {time.perf_counter() - began:.2f} s)")  # fmt: skip
    return seconds


def _classes_of(severity: str) -> int:
    """The classes of the severity's messages that the pair's tasks of its statuses have."""
    from django.db import connection

    from corpora.statuses import SEVERITIES

    statuses, message_severity = SEVERITIES[severity]
    corpus_id, service_id = scale_data.pair_ids()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(DISTINCT c.id) FROM corpora_messagetally t JOIN corpora_messageclass c"
            " ON c.id = t.message_class_id AND c.level = 0 AND c.severity = %s"
            " WHERE t.corpus_id = %s AND t.service_id = %s AND t.task_status = ANY(%s) AND t.tasks > 0",
            [message_severity, corpus_id, service_id, list(statuses)],
        )
        return cursor.fetchone()[0]


def activation_service() -> int:
    """The id of the second service, registered if missing and removed from the corpus if an interrupted
    run left it there."""
    from corpora.models import Activation
    from services.actions import service_register
    from services.models import Service

    service = Service.objects.filter(name=ACTIVATION_SERVICE).first() or service_register(
        name=ACTIVATION_SERVICE, actor=ACTOR, description="scale benchmark activation"
    )
    if Activation.objects.filter(corpus__name=scale_data.CORPUS, service=service).exists():
        activation_remove(service.pk)
    return service.pk


def activation_remove(service_id: int) -> None:
    """Deactivate the second service (corpora.pairs.data_purge of the pair) and remove its runs, so the
    data set is as it was; then VACUUM the task table. Not measured."""
    from django.db import connection

    from corpora.pairs import data_purge

    corpus_id, _ = scale_data.pair_ids()
    began = time.perf_counter()
    data_purge(corpus_id=corpus_id, service_id=service_id, actor=ACTOR)
    scale_data.history_trim(corpus_id, service_id, 0, 0)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_task, corpora_taskcount")
    say(f"  deactivated and vacuumed in {time.perf_counter() - began:.1f} s (not measured)")


def activation(tasks: int) -> float:
    """service_activate of the second service on every document and its job: seconds."""
    from corpora.actions.corpora import service_activate
    from jobs.runner import job_run

    with harness.phases_recorded([]) as log:
        began = time.perf_counter()
        job = service_activate(corpus_name=scale_data.CORPUS, service_name=ACTIVATION_SERVICE, actor=ACTOR, send=False)
        state = job_run(job.pk)
        seconds = time.perf_counter() - began
    job.refresh_from_db()
    if state != "succeeded" or (job.result or {}).get("tasks") != tasks:
        fail(f"the activation ended {state} with {job.result} ({job.message})")
    say(f"  activation: {seconds:.2f} s for {tasks:,} tasks ({tasks / seconds:,.0f} tasks/s)")
    for line in harness.statement_lines(log.statements_over(0.05)):
        say(line)
    return seconds


# --- main ---------------------------------------------------------------------------------------------


def checked(pair: tuple[int, int], shape: message_shape.Shape, per_task: float, when: str) -> None:
    began = time.perf_counter()
    problems = scale_data.consistency_problems(*pair, shape, per_task)
    if problems:
        fail(f"the data set is inconsistent {when}: " + "; ".join(problems))
    say(f"check {when}: consistent ({time.perf_counter() - began:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2_800_000, help="documents (tex_to_html tasks)")
    parser.add_argument("--messages-per-task", type=float, default=150.0, help="log messages per task on average")
    parser.add_argument("--rerun-tasks", type=int, default=100_000,
                        help="tasks of the rerun's what-class (at most a tenth of --tasks)")  # fmt: skip
    parser.add_argument("--requests", type=int, default=100, help="timed requests per kind of page")
    parser.add_argument("--check", action="store_true", help=f"check the data whole (default up to {CHECK_UP_TO:,})")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object on the last line")
    parser.add_argument("--wait", type=float, default=7200, help="seconds to wait for other benchmarks at most")
    parser.add_argument("--drop", action="store_true", help="drop the data set (its database) and exit")
    args = parser.parse_args()
    if args.drop:
        database_drop()
        return
    if args.tasks < 10 or args.messages_per_task <= 0:
        parser.error("--tasks must be at least 10 and --messages-per-task positive")
    rerun_tasks = min(args.rerun_tasks, args.tasks // 10)
    if rerun_tasks != args.rerun_tasks:
        say(f"the rerun's what-class holds {rerun_tasks:,} tasks (a tenth of --tasks)")

    shape = message_shape.sample_shape(harness.SAMPLE_CORPUS, harness.BENCH_ROOT / "sample-shape.json")
    say(f"sample: {shape.summary()}")
    options = scale_data.Options(
        args.tasks, args.messages_per_task, rerun_tasks, scale_data.shape_digest(shape), scale_data.pool_size(shape)
    )
    reused = database_prepare(options)
    harness.setup()
    from django.db import connection

    generation: dict[str, Any] = {"reused": reused}
    if reused:
        made = scale_data.made_read()
        steps, messages_seconds = made["steps"], made["messages_seconds"]
        say(f"data: reused ({made['tasks']:,} tasks, {made['messages']:,} messages; built earlier in"
            f" {sum(steps.values()):.0f} s)")  # fmt: skip
    else:
        say(f"data: generating {args.tasks:,} tasks with about {args.messages_per_task:g} messages each")
        built = scale_data.data_generate(options, shape, ACTOR)
        made = scale_data.made_read()
        steps, messages_seconds = built.steps, built.messages_seconds
    total_seconds = sum(steps.values())
    # The templates take the same time whatever the size: the speed is the rest's.
    scaled_seconds = total_seconds - sum(value for name, value in steps.items() if name.startswith("templates"))
    messages = made["messages"]
    generation.update({
        "seconds": round(total_seconds, 1), "messages_seconds": round(messages_seconds, 1),
        "tasks_per_s": round(args.tasks / scaled_seconds), "messages_per_s": round(messages / messages_seconds),
        "steps": {name: round(seconds, 2) for name, seconds in steps.items()},
    })  # fmt: skip
    say(f"data: {args.tasks:,} tasks, {messages:,} messages; built in {total_seconds:.1f} s"
        f" ({generation['tasks_per_s']:,} tasks/s without the templates; the message steps {messages_seconds:.1f} s,"
        f" {generation['messages_per_s']:,} messages/s)")  # fmt: skip

    pair = scale_data.pair_ids()
    if reused:
        restore(pair)  # a rerun an interrupted run left
        scale_data.history_trim(*pair, made["last_run"], made["last_snapshot"])
    service_two = activation_service()
    if reused:
        began = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                "VACUUM (ANALYZE) corpora_task, corpora_taskcount, corpora_taskmessages, corpora_taskclass,"
                " corpora_messagetally, corpora_taskruntime, corpora_reportgrain, corpora_grainslice"
            )
        say(f"data: VACUUM (ANALYZE) {time.perf_counter() - began:.1f} s (not measured)")
    check = args.check or args.tasks <= CHECK_UP_TO
    if check:
        checked(pair, shape, args.messages_per_task, "after generation" if not reused else "of the reused data")

    table_sizes = scale_data.sizes(scale_data.MESSAGE_TABLES)
    message_bytes = sum(table_sizes.values())
    database_bytes = scale_data.database_size()
    say("sizes: " + ", ".join(f"{table} {size / 1e6:,.1f} MB" for table, size in table_sizes.items()))
    say(f"  messages {message_bytes / 1e6:,.1f} MB = {message_bytes / messages:.1f} bytes a message;"
        f" database {database_bytes / 1e9:.2f} GB")  # fmt: skip
    token = harness.bench_token()
    seconds: dict[str, float] = {}

    def quietly(label: str, measure: Callable[[], Any], between: Callable[[], Any] | None = None) -> Any:
        return harness.quietly(label, measure, wait=args.wait, between=between)

    say("\ncold slice builds (the pair's grains cleared first):")
    builds = quietly("cold slice builds", lambda: cold_builds(pair))
    seconds["cold_slice_build_info"] = builds["info"]

    say("\nglobal refresh (reports_rebuild_all):")
    seconds["global_refresh"] = quietly("global refresh", global_refresh)

    say(f"\npages through the request stack (django.test.Client, {args.requests} requests a kind after a warming"
        " pass):")  # fmt: skip
    sets = page_sets(pair, args.tasks, rerun_tasks, args.requests)
    for page_set in sets:
        quietly(
            f"{page_set.kind} pages", lambda page_set=page_set: harness.pages_measure(page_set, args.requests, token)
        )
        t = page_set.timings
        say(f"  {page_set.kind:<14} x{len(t):4d} over {len(page_set.urls):4d} URLs: p50 {percentile(t, 0.5):7.1f} ms"
            f"  p95 {percentile(t, 0.95):7.1f} ms  max {max(t):7.1f} ms")  # fmt: skip
        if page_set.kind in ("run_history", "status"):
            for url, values in page_set.by_url.items():
                say(f"      {url[:60]:<60} p95 {percentile(values, 0.95):7.1f} ms")

    say("\nsnapshot, rerun, diff matrix:")
    seconds["snapshot"], before = quietly("snapshot", lambda: snapshot(pair, args.tasks))
    if rerun_tasks:
        seconds["rerun"] = quietly("rerun", lambda: rerun_once(pair, rerun_tasks), between=lambda: restore(pair))
        seconds["rerun_purge"] = PURGE["rerun_purge"]
        _, after = snapshot(pair, args.tasks)
        seconds["diff_matrix"] = quietly(
            "diff matrix", lambda: diff_once(before, after, rerun_tasks), between=lambda: diff_forget(before, after)
        )
        restore(pair)
        began = time.perf_counter()
        from corpora.actions.reports import reports_rebuild_all

        reports_rebuild_all(progress=lambda *_: None, log=lambda _: None)
        say(f"  grains rebuilt in {time.perf_counter() - began:.1f} s (not measured)")
    trimmed = scale_data.history_trim(*pair, made["last_run"], made["last_snapshot"])
    say(f"  removed the {trimmed} snapshots taken here (not measured)")

    say(f"\nsandbox carves (per_class_limit={PER_CLASS_LIMIT}):")
    for severity in ("info", "error"):
        seconds[f"sandbox_carve_{severity}"] = quietly(f"sandbox {severity}", lambda s=severity: sandbox_carve(s))

    say("\nactivation of a second service on every document:")
    seconds["activation"] = quietly(
        "activation", lambda: activation(args.tasks), between=lambda: activation_remove(service_two)
    )
    activation_remove(service_two)

    if check:
        checked(pair, shape, args.messages_per_task, "at the end")
    if harness.DISTURBED:
        say(f"NOTE: measured while other benchmarks ran, after every retry: {', '.join(harness.DISTURBED)}")
    say(f"\nend: {harness.load_line()}")

    result = {
        "tasks": args.tasks,
        "messages": messages,
        "messages_per_task": round(messages / args.tasks, 1),
        "message_bytes": message_bytes,
        "bytes_per_message": round(message_bytes / messages, 2),
        "database_bytes": database_bytes,
        "table_bytes": table_sizes,
        "rerun_tasks": rerun_tasks,
        "p95_ms": {s.kind: round(percentile(s.timings, 0.95), 2) for s in sets},
        "p50_ms": {s.kind: round(percentile(s.timings, 0.5), 2) for s in sets},
        "seconds": {name: round(value, 3) for name, value in seconds.items()},
        "cold_slice_build_s": {severity: round(value, 3) for severity, value in builds.items()},
        "generation": generation,
        "disturbed": list(harness.DISTURBED),
    }
    say("\nsummary:")
    for kind, value in result["p95_ms"].items():
        say(f"  {kind:<22} p95 {value:9.1f} ms")
    for name, value in result["seconds"].items():
        say(f"  {name:<22} {value:9.2f} s")
    say(f"  {'message bytes':<22} {message_bytes / 1e9:9.2f} GB, {result['bytes_per_message']} a message")
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
