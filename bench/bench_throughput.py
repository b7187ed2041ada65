"""Corpus throughput on real documents: the system (dispatcher and the bundled worker) against latexmlc
run directly with the same parallelism, every per-conversion limit on (target: direct time / system
time at least 0.95).

Direct: every document of the corpus (--corpus: LaTeXML's test documents by default, or a directory of
arXiv-style archives such as ../shared/corpora/real, unpacked first), in a work directory, is converted by
`latexmlc --format=html5 --dest=... --log=cortex.log --timeout=T+5 [the profile's options] ./main.tex` (the
worker's argv, see conversion/engine.py; --profile names the preset both sides use) in its own session
under the worker's memory limit, --parallel at a time in import order, and killed at the same wall-clock
timeout the worker applies. It runs on the host as it is, with the sandbox's ImageMagick policy alone
(conversion.sandbox.host_with_policy), so that its figures read as a worker's do. Timed from the first
start to the last exit; each document's runtime and peak resident size (its process tree, sampled every
0.2 s) are reported at p50, p90 and max.

System: the sample is imported as a corpus, `manage.py dispatcher` and one
`manage.py worker --service tex_to_html --concurrency N` (N = --parallel) are started and idle, then
tex_to_html is activated. Timed from activation until every task has a final status: the moment the
ingestion of the last result closes the run (its finished_at), read after a poll that runs every 20 ms
only until the first lease and every 0.5 s after, so that the benchmark's own queries take next to no
CPU from the conversions (at 20 ms they took ~5% of a CPU, this script and its PostgreSQL backend).

A document that runs into the timeout holds one of the N slots for the whole timeout on both sides
and so hides any per-document overhead; --exclude NAME measures without it as well.

The system side runs with every per-conversion limit on, as the defaults have them (the sandbox, the
disk and process checks, the cgroup per conversion where one can be made, the memory governor, the
heartbeats). `--worker-env KEY=VALUE` sets a worker setting for the system side, to measure what one of
them costs: e.g. `--worker-env CONVERSION_CGROUPS=off` or `--worker-env CONVERSION_MEMORY_FLOOR_MB=0`.

Each of `--repeat` (3) pairs runs both sides one after the other, which side first in turns, and the
median ratio of the pairs counts: this machine's speed drifts by ±10% between minutes, more than the
difference measured.

Run: .venv/bin/python bench/bench_throughput.py [--parallel 2] [--timeout 120] [--system-first] [--repeat 3]
     [--exclude complex_si] [--worker-env KEY=VALUE ...] [--corpus ../shared/corpora/real] [--profile arxiv]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import harness

harness.configure("ccs_dispatch_bench", 14, Path("/tmp/ccs-dispatch-bench"))

TARGET_RATIO = 0.95
# The system side's poll for the end, once the first task is leased: the end itself is read from the run.
POLL_AFTER_FIRST_LEASE_SECONDS = 0.5
SAMPLE = harness.SAMPLE_CORPUS
CORPUS_NAME = "bench-sample"
SERVICE = "tex_to_html"
DIRECT_ROOT = harness.BENCH_ROOT / "direct"
# Task status for each LaTeXML status code: 0 no_problem .. 3 fatal.
TASK_STATUS = {0: -1, 1: -2, 2: -3, 3: -4}
STATUS_NAMES = {-1: "no_problem", -2: "warning", -3: "error", -4: "fatal", -5: "invalid"}


@dataclass(frozen=True)
class DirectResult:
    """One document converted directly."""

    name: str
    seconds: float
    status: int  # the task status its log gives (-4 without a status line or when killed)
    timed_out: bool
    peak_rss: int = 0  # the largest resident size of its processes together, in bytes


def sample_copy(target: Path, exclude: frozenset[str], corpus: Path = SAMPLE) -> list[str]:
    """A fresh copy of the corpus's documents but `exclude` at `target`, archives as they are; their entry
    names in import order."""
    from corpora.scan import entry_names

    def left_out(directory: str, names: list[str]) -> list[str]:
        return [name for name in names if name in exclude] if Path(directory) == corpus else []

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(corpus, target, ignore=left_out)
    return entry_names(target)


def unpacked_copy(target: Path, exclude: frozenset[str], corpus: Path) -> dict[str, tuple[Path, str]]:
    """Each document of the corpus but `exclude` unpacked as a worker unpacks its payload, under `target`:
    {entry: (its directory, its main file there)}, in import order."""
    from conversion.archive import inspect_entry, pack_entry
    from conversion.worker import unpack_payload

    entries = sample_copy(target / ".entries", exclude, corpus)
    unpacked = {}
    for entry in entries:
        found = inspect_entry(target / ".entries" / entry, entry)
        if found.problem:
            harness.fail(f"{entry}: {found.problem} {found.detail}")
        directory = target / found.name
        unpack_payload(pack_entry(target / ".entries" / entry, found.kind, entry), directory)
        unpacked[entry] = (directory, found.main_file)
    shutil.rmtree(target / ".entries")
    return unpacked


class DirectRuns:
    """The latexmlc processes the direct side is running, so that they can all be killed at once
    when the script is stopped (the pool's threads would otherwise work off the whole queue)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.running: dict[int, subprocess.Popen] = {}

    def started(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.running[process.pid] = process
        if self.stopping.is_set():
            self.kill_all()

    def ended(self, process: subprocess.Popen) -> None:
        with self.lock:
            self.running.pop(process.pid, None)

    def kill_all(self) -> None:
        """Stop starting conversions and SIGKILL the process group of every running one."""
        self.stopping.set()
        with self.lock:
            for pid in self.running:
                with suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)


def peak_watch(process: subprocess.Popen, done: threading.Event) -> list[int]:
    """Sample the resident size of `process` and its descendants every 0.2 s until `done`; the largest
    sum seen is in the returned list's one element once `done` is set."""
    import psutil

    peak = [0]

    def sample() -> None:
        with suppress(psutil.Error):
            root = psutil.Process(process.pid)
            while not done.wait(0.2):
                total = 0
                for member in (root, *root.children(recursive=True)):
                    with suppress(psutil.Error):
                        total += member.memory_info().rss
                peak[0] = max(peak[0], total)

    threading.Thread(target=sample, daemon=True).start()
    return peak


def direct_convert(
    source: Path, main_file: str, *, timeout: float, memory_mb: int, runs: DirectRuns, profile: str = "default"
) -> DirectResult | None:
    """latexmlc on one document with the worker's argv for the profile, memory limit and outside wall-clock
    timeout, with the sandbox's ImageMagick policy; None when the run is being stopped."""
    from conversion import engine, imagemagick, profiles
    from conversion.sandbox import host_with_policy

    if runs.stopping.is_set():
        return None

    how = profiles.invocation(profiles.PRESETS[profile].profile, roots=[], timeout=timeout, memory_mb=memory_mb)
    timeout, memory_mb = how.timeout, how.memory_mb
    output = source / ".direct-output"
    output.mkdir()
    argv = [
        how.executable,
        "--format=html5",
        f"--dest={output / (Path(main_file).stem + '.html')}",
        f"--log={engine.LOG_NAME}",
        f"--timeout={math.ceil(timeout) + engine.LATEXMLC_TIMEOUT_MARGIN_SECONDS}",
        *how.options,
        f"./{Path(main_file).name}",
    ]
    limit = memory_mb * 1024 * 1024

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    timed_out = False
    policy = imagemagick.policy_xml(memory_mb=memory_mb, disk_mb=engine.DEFAULT_DISK_MB, timeout=timeout)
    with tempfile.TemporaryFile() as stderr, host_with_policy(policy) as (prefix, descriptors):
        began = time.perf_counter()
        process = subprocess.Popen(
            [*prefix, *argv], cwd=source / Path(main_file).parent, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True, preexec_fn=limit_memory,
            pass_fds=descriptors,
        )  # fmt: skip
        runs.started(process)
        done = threading.Event()
        peak = peak_watch(process, done)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(engine.TERMINATE_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        finally:
            done.set()
            runs.ended(process)
        seconds = time.perf_counter() - began
    log_path = source / Path(main_file).parent / engine.LOG_NAME
    code = engine.status_code_of(log_path.read_bytes()) if log_path.exists() else None
    status = -4 if timed_out or code is None else TASK_STATUS.get(code, -4)
    return DirectResult(name=source.name, seconds=seconds, status=status, timed_out=timed_out, peak_rss=peak[0])


def direct_measure(
    parallel: int, timeout: float, memory_mb: int, exclude: frozenset[str], corpus: Path, profile: str
) -> tuple[float, dict[str, DirectResult]]:
    """Convert every document of the corpus directly, `parallel` at a time; (seconds, result per entry)."""
    shutil.rmtree(DIRECT_ROOT, ignore_errors=True)
    unpacked = unpacked_copy(DIRECT_ROOT, exclude, corpus)
    runs = DirectRuns()
    watch = harness.CpuWatch().start()
    with harness.timed() as timer, ThreadPoolExecutor(max_workers=parallel) as pool:
        try:
            futures = [
                pool.submit(
                    direct_convert, directory, main, timeout=timeout, memory_mb=memory_mb, runs=runs, profile=profile
                )
                for directory, main in unpacked.values()
            ]
            results = [future.result() for future in futures]
        except BaseException:  # SIGTERM, Ctrl-C or a failure: leave no latexmlc running
            runs.kill_all()
            pool.shutdown(cancel_futures=True)
            raise
    print(f"  direct side: {watch.report()}")
    return timer.seconds, {result.name: result for result in results if result is not None}


@dataclass(frozen=True)
class SystemOutcome:
    """What the system run produced."""

    seconds: float
    first_lease: float | None
    statuses: dict[str, int]  # task status per document name
    runtimes_ms: dict[str, int]  # Info:runtime_ms per document name
    timed_out: list[str]


def system_measure(
    children: harness.Children,
    parallel: int,
    timeout: float,
    exclude: frozenset[str],
    worker_env: dict[str, str],
    corpus: Path = SAMPLE,
    profile: str = "default",
) -> SystemOutcome:
    """Import the corpus, start the dispatcher and one worker, give tex_to_html the profile, activate it and
    wait for the end."""  # fmt: skip
    from django.db import connection

    from corpora.actions.corpora import _import_service_id
    from services.actions import service_profile_set

    removed = harness.corpus_remove(CORPUS_NAME)
    if removed is not None:
        print(f"removed the corpus left by an earlier run in {removed:.1f} s")
    directory = harness.CORPUS_ROOT / "sample"
    sample_copy(directory, exclude, corpus)
    corpus_id, imported = harness.corpus_import_now(CORPUS_NAME, directory)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM corpora_task WHERE corpus_id = %s AND service_id = %s AND status <> -5",
            [corpus_id, _import_service_id()],
        )
        valid = cursor.fetchone()[0]
    service_id = harness.service_ensure(SERVICE)
    service_profile_set(name=SERVICE, actor=harness.ACTOR, preset=profile)
    settings = {"CONVERSION_TIMEOUT_SECONDS": str(int(timeout))}
    dispatcher = harness.dispatcher_start(children, **settings)
    ports = {
        "DISPATCHER_VENTILATOR_PORT": str(dispatcher.ventilator_port),
        "DISPATCHER_SINK_PORT": str(dispatcher.sink_port),
    }
    argv = [sys.executable, "manage.py", "worker", "--service", SERVICE, "--concurrency", str(parallel)]
    worker = children.start("worker", argv, env=harness.child_env(**settings, **ports, **worker_env))

    def serving() -> bool:
        if not worker.alive:
            harness.fail(f"the worker exited with {worker.process.returncode}:\n{worker.log_tail()}")
        return "worker serving" in worker.log_tail()

    harness.wait_for(serving, timeout=60, what="the worker to start")
    print(f"set-up (not measured): import {imported:.1f} s of {valid} valid documents; dispatcher and worker idle")
    watch = harness.CpuWatch().start()
    started, started_wall = time.perf_counter(), time.time()
    tasks, _ = harness.service_activate_now(CORPUS_NAME, SERVICE)
    if tasks != valid:
        harness.fail(f"activation created {tasks} tasks for {valid} valid documents")
    # Polled finely only until the first lease; the end is the run's close, which the ingestion of the last
    # result writes (corpora.pairs.runs_close_drained), so rare polls cost the conversions no CPU and no precision.
    polled, first_lease = harness.pair_drained_wait(
        corpus_id, service_id, expected=valid, started=started, timeout=valid * (timeout + 30),
        interval_after_first=POLL_AFTER_FIRST_LEASE_SECONDS,
    )  # fmt: skip
    seconds = run_end(corpus_id, service_id, started_wall) or polled
    print(f"  system side: {watch.report()}")
    print(
        f"  system side's own CPU, beside the conversions: {cpu_breakdown(watch, dispatcher.child.process.pid, worker)}"
    )
    worker.stop(grace=60)
    dispatcher.child.stop(grace=60)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.name, t.status, r.runtime_ms FROM corpora_task t JOIN corpora_document d ON d.id = t.document_id"
            " LEFT JOIN corpora_taskruntime r ON r.task_id = t.id WHERE t.corpus_id = %s AND t.service_id = %s",
            [corpus_id, service_id],
        )
        rows = cursor.fetchall()
        # The tasks with a message of category timeout (any severity): their (task, class) rows.
        cursor.execute(
            "SELECT DISTINCT d.name FROM corpora_taskclass p"
            " JOIN corpora_messageclass c ON c.id = p.message_class_id AND c.level = 0 AND c.category = 'timeout'"
            " JOIN corpora_task t ON t.id = p.task_id JOIN corpora_document d ON d.id = t.document_id"
            " WHERE p.corpus_id = %s AND p.service_id = %s ORDER BY 1",
            [corpus_id, service_id],
        )
        timed_out = [name for (name,) in cursor.fetchall()]
    return SystemOutcome(
        seconds=seconds,
        first_lease=first_lease,
        statuses={name: status for name, status, _ in rows},
        runtimes_ms={name: runtime for name, _, runtime in rows if runtime is not None},
        timed_out=timed_out,
    )


def run_end(corpus_id: int, service_id: int, started_wall: float) -> float | None:
    """Seconds from `started_wall` (a time.time() value) until the pair's run closed, or None when the
    newest run opened before then or is still open."""
    from corpora.models import Run

    run = Run.objects.filter(corpus_id=corpus_id, service_id=service_id).order_by("-started_at", "-id").first()
    if run is None or run.finished_at is None or run.started_at.timestamp() < started_wall:
        return None
    return run.finished_at.timestamp() - started_wall


def cpu_breakdown(watch: harness.CpuWatch, dispatcher_pid: int, worker: harness.Child) -> str:
    """Share of one CPU that the dispatcher (its sink included), the worker process itself (not the
    conversions it runs), the benchmark database's PostgreSQL backends and this script used in the window."""
    dispatcher = {dispatcher_pid} | harness.children_of(dispatcher_pid)
    parts = {
        "dispatcher": watch.share(lambda pid, command: pid in dispatcher),
        "worker": watch.share(lambda pid, command: pid == worker.process.pid),
        "PostgreSQL": watch.share(lambda pid, command: command.startswith("postgres:") and harness.BENCH_DB in command),
        "this script": watch.share(lambda pid, command: pid == os.getpid()),
    }
    return ", ".join(f"{name} {100 * share:.1f}%" for name, share in parts.items()) + " of a CPU"


def direct_report(seconds: float, results: dict[str, DirectResult], parallel: int) -> None:
    """Print the direct run's time, its busiest documents, its timeouts, and each document's runtime and
    peak memory at p50, p90 and max."""
    busy = sum(result.seconds for result in results.values())
    runtimes = [result.seconds for result in results.values()]
    peaks = [result.peak_rss / 2**20 for result in results.values()]
    for label, values, unit in (("runtime", runtimes, "s"), ("peak memory", peaks, "MB")):
        print(f"  per document {label}: p50 {harness.percentile(values, 0.5):.1f} {unit}, "
              f"p90 {harness.percentile(values, 0.9):.1f} {unit}, max {max(values, default=0):.1f} {unit}")  # fmt: skip
    slowest = sorted(results.values(), key=lambda result: -result.seconds)[:3]
    print(f"direct: {len(results)} documents in {seconds:.1f} s with {parallel} parallel latexmlc")
    print(
        f"  sum of per-document times {busy:.1f} s; slowest: "
        + ", ".join(f"{r.name} {r.seconds:.1f} s" for r in slowest)
    )
    timed_out = sorted(result.name for result in results.values() if result.timed_out)
    print(f"  timed out: {', '.join(timed_out) or 'none'}")


def system_report(outcome: SystemOutcome, parallel: int) -> None:
    """Print the system run's time, its runtimes and its timeouts."""
    busy = sum(outcome.runtimes_ms.values()) / 1000
    first = f"{outcome.first_lease:.2f} s" if outcome.first_lease is not None else "not caught"
    print(f"system: {len(outcome.statuses)} tasks in {outcome.seconds:.1f} s with 1 worker of concurrency {parallel}")
    print(f"  sum of Info:runtime_ms {busy:.1f} s; first task leased after {first}")
    print(f"  timed out: {', '.join(outcome.timed_out) or 'none'}")


def statuses_compare(direct: dict[str, DirectResult], system: SystemOutcome) -> None:
    """Print the status counts of both runs and the documents whose status differs."""

    def counts(statuses: list[int]) -> str:
        return ", ".join(f"{STATUS_NAMES.get(s, s)} {statuses.count(s)}" for s in sorted(set(statuses), reverse=True))

    print(f"  statuses direct: {counts([r.status for r in direct.values()])}")
    print(f"  statuses system: {counts(list(system.statuses.values()))}")
    differ = [
        f"{name} ({STATUS_NAMES.get(result.status)} / {STATUS_NAMES.get(system.statuses.get(name, 0), 'missing')})"
        for name, result in sorted(direct.items())
        if system.statuses.get(name) != result.status
    ]
    print(f"  documents whose status differs (direct / system): {', '.join(differ) or 'none'}")


def main() -> None:
    """Run both sides and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=2, help="parallel conversions on both sides")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per document on both sides")
    parser.add_argument("--system-first", action="store_true", help="run the system side before the direct one")
    parser.add_argument("--exclude", action="append", default=[], help="leave a sample document out (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs, in turns; the median ratio counts")
    parser.add_argument("--corpus", type=Path, default=SAMPLE, help="a directory of documents (archives or not)")
    parser.add_argument("--profile", default="default", help="the preset profile both sides convert with")
    parser.add_argument(
        "--worker-env", action="append", default=[], metavar="KEY=VALUE",
        help="a setting for the system side's worker (repeatable), e.g. CONVERSION_CGROUPS=off",
    )  # fmt: skip
    args = parser.parse_args()
    exclude = frozenset(args.exclude)
    if any("=" not in item for item in args.worker_env):
        parser.error("--worker-env takes KEY=VALUE")
    worker_env = dict(item.split("=", 1) for item in args.worker_env)

    harness.setup()
    from django.conf import settings

    memory_mb = settings.CONVERSION_MEMORY_MB
    from conversion.profiles import PRESETS

    if args.profile not in PRESETS:
        parser.error(f"--profile must be one of {', '.join(sorted(PRESETS))}")
    corpus = args.corpus.resolve()
    documents = len(set(os.listdir(corpus)) - exclude)
    left_out = f" (left out: {', '.join(sorted(exclude))})" if exclude else ""
    print(f"{documents} documents from {corpus}{left_out}; timeout {args.timeout} s, memory {memory_mb} MB each;"
          f" profile {args.profile}")  # fmt: skip
    if worker_env:
        print(f"system side's worker with {' '.join(f'{key}={value}' for key, value in sorted(worker_env.items()))}")
    ratios: list[float] = []
    for repetition in range(args.repeat):
        # Side by side, in turns: this machine's speed drifts by ±10% from one minute to the next, more
        # than what is measured, so each ratio compares two neighbouring runs and the median counts.
        system_first = args.system_first != (repetition % 2 == 1)
        with harness.children_owned() as children:
            sides = (args.parallel, args.timeout)
            if system_first:
                system = system_measure(children, *sides, exclude, worker_env, corpus, args.profile)
                direct_seconds, direct = direct_measure(*sides, memory_mb, exclude, corpus, args.profile)
            else:
                direct_seconds, direct = direct_measure(*sides, memory_mb, exclude, corpus, args.profile)
                system = system_measure(children, *sides, exclude, worker_env, corpus, args.profile)
        direct_report(direct_seconds, direct, args.parallel)
        system_report(system, args.parallel)
        statuses_compare(direct, system)
        ratios.append(direct_seconds / system.seconds)
        print(f"ratio direct / system, run {repetition + 1} ({'system' if system_first else 'direct'} first):"
              f" {ratios[-1]:.3f}")  # fmt: skip
    ratio = statistics.median(ratios)
    verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
    each = ", ".join(f"{value:.3f}" for value in ratios)
    print(
        f"ratio direct / system: {ratio:.3f}, the median of {len(ratios)} ({each})"
        f" (target >= {TARGET_RATIO:.2f}: {verdict})"
    )


if __name__ == "__main__":
    main()
