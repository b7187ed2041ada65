"""A run's makespan on real papers with N workers: leases longest-expected-first against first-in-first-out
(docs/decisions/cost-and-schedule.md).

The corpus (--corpus: ../shared/corpora/real by default) is imported, and the real system runs it: `manage.py
dispatcher` and one `manage.py worker --service tex_to_html --concurrency N` (N = --parallel, 2), every
per-conversion limit on, the conversion timeout --timeout. Three runs, each timed from its start until its
close (the run's finished_at, written by the ingestion of its last result):

1. learn: tex_to_html is activated, leases first in, first out; its runtimes are what the next runs expect
   (Task.expected_ms, set by the rerun from each document's last runtime);
2. and 3. a rerun of every task, once longest-first and once FIFO (`dispatcher.longest_first`, given to the
   dispatcher as DISPATCHER_LONGEST_FIRST), in turns by --fifo-first, so that both see the same warm caches.

The lower bound of a makespan is max(longest runtime, sum of runtimes / N); the script prints it beside each
run, with the run's CPU seconds and papers per core-hour (GET .../cost's figures, read from its query).

Run: .venv/bin/python bench/bench_makespan.py [--parallel 2] [--timeout 120] [--fifo-first] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import harness

harness.configure("ccs_makespan_bench", 2, Path("/tmp/ccs-makespan-bench"))

CORPUS_NAME = "makespan"
SERVICE = "tex_to_html"
REAL = harness.PROJECT_ROOT.parent / "shared" / "corpora" / "real"


def run_end(corpus_id: int, service_id: int, started_wall: float) -> tuple[float, int]:
    """Seconds from `started_wall` until the pair's newest run closed, and its id."""
    from corpora.models import Run

    run = Run.objects.filter(corpus_id=corpus_id, service_id=service_id).order_by("-started_at", "-id").first()
    if run is None or run.finished_at is None:
        harness.fail("the run did not close")
    return run.finished_at.timestamp() - started_wall, run.pk


def runtimes(corpus_id: int, service_id: int) -> list[int]:
    from corpora.models import TaskRuntime

    return list(
        TaskRuntime.objects.filter(corpus_id=corpus_id, service_id=service_id).values_list("runtime_ms", flat=True)
    )


def one_run(
    children: harness.Children, *, label: str, longest_first: bool, start: Callable[[], None], corpus_id: int,
    service_id: int, expected: int, parallel: int, timeout: int,
) -> float:  # fmt: skip
    """Start a dispatcher leasing in that order and a worker, `start()` the run, wait for its close."""
    from corpora.models import Run
    from corpora.queries.corpora import pair_resolve
    from corpora.queries.cost import pair_cost

    settings = {"CONVERSION_TIMEOUT_SECONDS": str(timeout), "DISPATCHER_LONGEST_FIRST": str(longest_first).lower()}
    dispatcher = harness.dispatcher_start(children, **settings)
    ports = {
        "DISPATCHER_VENTILATOR_PORT": str(dispatcher.ventilator_port),
        "DISPATCHER_SINK_PORT": str(dispatcher.sink_port),
    }
    argv = [sys.executable, "manage.py", "worker", "--service", SERVICE, "--concurrency", str(parallel)]
    worker = children.start("worker", argv, env=harness.child_env(**settings, **ports))
    harness.wait_for(lambda: "worker serving" in worker.log_tail(), timeout=90, what="the worker to start")
    load = harness.load_line()
    started, started_wall = time.perf_counter(), time.time()
    start()
    harness.pair_drained_wait(
        corpus_id, service_id, expected=expected, started=started, timeout=expected * (timeout + 30),
        interval=0.5,
    )  # fmt: skip
    seconds, run_id = run_end(corpus_id, service_id, started_wall)
    worker.stop(grace=60)
    dispatcher.child.stop(grace=60)
    times = runtimes(corpus_id, service_id)
    bound = max(max(times), sum(times) / parallel) / 1000
    cost = pair_cost(pair_resolve(CORPUS_NAME, SERVICE)).last_closed_run
    assert cost is not None and cost.id == Run.objects.get(pk=run_id).pk
    print(
        f"{label}: makespan {seconds:.1f} s (lower bound {bound:.1f} s: longest {max(times) / 1000:.1f} s,"
        f" sum {sum(times) / 1000:.1f} s / {parallel}); CPU {cost.cpu_seconds:.1f} s,"
        f" {cost.papers_per_core_hour} papers a core-hour, peak memory p50/p90"
        f" {cost.peak_memory.p50.mib if cost.peak_memory.p50 else '-'}/"
        f"{cost.peak_memory.p90.mib if cost.peak_memory.p90 else '-'} MiB; load at start {load}, at end"
        f" {harness.load_line()}"
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=2, help="the worker's concurrency")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per conversion (bounds a run)")
    parser.add_argument("--fifo-first", action="store_true", help="the FIFO rerun before the longest-first one")
    parser.add_argument("--corpus", type=Path, default=REAL, help="a directory of documents")
    args = parser.parse_args()
    harness.setup()
    from corpora.actions.reports import rerun
    from corpora.models import Task

    removed = harness.corpus_remove(CORPUS_NAME)
    if removed is not None:
        print(f"removed the corpus left by an earlier run in {removed:.1f} s")
    directory = harness.CORPUS_ROOT / "real"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(args.corpus.resolve(), directory, ignore=lambda _, names: [n for n in names if n == "README.md"])
    corpus_id, imported = harness.corpus_import_now(CORPUS_NAME, directory)
    service_id = harness.service_ensure(SERVICE)

    def tasks() -> int:
        return Task.objects.filter(corpus_id=corpus_id, service_id=service_id).count()

    print(f"imported {args.corpus} in {imported:.1f} s; {args.parallel} conversions at once, timeout {args.timeout} s")
    figures: dict[str, float] = {}
    with harness.children_owned() as children:
        common = {"corpus_id": corpus_id, "service_id": service_id, "parallel": args.parallel, "timeout": args.timeout}

        def activate() -> None:
            harness.service_activate_now(CORPUS_NAME, SERVICE)

        def rerun_all() -> None:
            rerun(corpus_name=CORPUS_NAME, service_name=SERVICE, actor=harness.ACTOR, description="makespan")

        one_run(children, label="learn (activation, FIFO)", longest_first=False, start=activate,
                expected=_valid(corpus_id), **common)  # fmt: skip
        expected = tasks()
        orders = [False, True] if args.fifo_first else [True, False]
        for longest_first in orders:
            label = "longest-first" if longest_first else "FIFO"
            figures[label] = one_run(children, label=f"rerun, {label}", longest_first=longest_first, start=rerun_all,
                                     expected=expected, **common)  # fmt: skip
    print(
        f"makespan longest-first {figures['longest-first']:.1f} s, FIFO {figures['FIFO']:.1f} s:"
        f" {figures['longest-first'] / figures['FIFO']:.3f} of FIFO"
    )


def _valid(corpus_id: int) -> int:
    """The corpus's documents whose import was valid: the tasks an activation makes."""
    from django.db import connection

    from corpora.actions.corpora import _import_service_id

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM corpora_task WHERE corpus_id = %s AND service_id = %s AND status <> -5",
            [corpus_id, _import_service_id()],
        )
        return cursor.fetchone()[0]


if __name__ == "__main__":
    main()
