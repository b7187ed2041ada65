"""Whole papers cold and warm: does a worker gain from LaTeXML loaded once (conversion.warm)?

Cold is a worker's conversion (conversion.worker.convert_task's call): each paper of --corpus is unpacked as
a worker unpacks its payload (conversion.archive.pack_entry, conversion.worker.unpack_payload) and converted
by `conversion.engine.convert` with the default profile's options (conversion.profiles.invocation: its
executable, options, read-only paths and timeout), in the sandbox, every limit on. Warm is one
`WarmServer.for_options` prepared with the same latexmlc options (`--format=html5 --dest=... --log=cortex.log
--timeout=T+5` and the profile's), its destination a fixed file in the sandbox's /work
(.cortex-output/document.html, where the cold run writes .cortex-output-XXXX/MAIN.html), converting the same
unpacked paper with convert_directory: its files copied into the server's /work, then a forked child
converts ./MAIN. The server is started once; its start is printed apart, as a worker would pay it once.

The papers run one at a time, each once cold and once warm, in turns (cold then warm, then warm then cold
for the next paper) so that a drift of the machine's speed falls on both sides alike. Each side's time is
the wall time of the whole call (the warm one includes copying the paper in). Per paper: both times, both
CPU times (each side's cgroup count: on a shared machine the steadier measure of the work), both statuses
(LaTeXML's status code, or the kill; they must be equal, a difference is marked and counted); then the
totals and the throughput gain, cold total / warm total - 1, over every paper and over the papers that
ended before the timeout on both sides. A paper at the timeout costs the timeout on both sides.

Run: .venv/bin/python bench/bench_warm_papers.py [--corpus ../shared/corpora/real] [--papers N] [--timeout 120]
     [--only PREFIX ...] [--exclude PREFIX ...] [--memory-mb 4096] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

import harness

from conversion import engine, profiles
from conversion.archive import inspect_entry, pack_entry
from conversion.choices import COMPLETED_NAMES, LatexmlStatus
from conversion.processes import scratch_prefix
from conversion.sandbox import INSIDE_WORK
from conversion.warm import ServerFailed, WarmServer
from conversion.worker import unpack_payload

REAL_CORPUS = harness.PROJECT_ROOT.parent / "shared" / "corpora" / "real"
WARM_DESTINATION = f"{INSIDE_WORK}/.cortex-output/document.html"
_TOTALS = ("label", "papers", "cold_s", "warm_s", "gain", "cold_cpu_s", "warm_cpu_s", "cpu_gain")
ADOPT_GAIN = 0.03  # the bar: adopt a warm start for workers only from a 3% throughput gain


@dataclass(frozen=True)
class Side:
    """One conversion of one paper."""

    seconds: float
    status: str  # LaTeXML's status by name, `timeout`, or the kill's reason
    cpu_seconds: float | None = None  # its processes' CPU time (its cgroup's count), None where unknown


@dataclass(frozen=True)
class Paper:
    name: str
    cold: Side
    warm: Side
    first: str  # which side ran first


def status_of(status_code: int | None, timed_out: bool, killed: str | None) -> str:
    if timed_out:
        return "timeout"
    if killed:
        return f"killed:{killed}"
    return COMPLETED_NAMES.get(-((status_code if status_code is not None else LatexmlStatus.FATAL) + 1), "fatal")


def unpacked(path: Path, target: Path) -> str:
    """The entry at `path` unpacked at `target` as a worker unpacks its payload; its main file's path there."""
    entry = inspect_entry(path, path.name)
    if entry.problem:
        harness.fail(f"{path.name}: {entry.problem} {entry.detail}")
    unpack_payload(pack_entry(path, entry.kind, path.name), target)
    return entry.main_file


def cold_run(pristine: Path, main_file: str, scratch: Path, how: profiles.Invocation) -> Side:
    """A worker's conversion of a fresh copy of the paper (the copy is not timed: the worker unpacks there)."""
    source = scratch / "cold"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(pristine, source, symlinks=True)
    main = PurePosixPath(main_file)
    started = time.monotonic()
    done = engine.convert(
        source / main.parent, main.name, timeout=how.timeout, memory_mb=how.memory_mb, latexmlc=how.executable,
        extra_args=how.options, read_only=how.read_only, root=source,
    )  # fmt: skip
    seconds = time.monotonic() - started
    shutil.rmtree(source, ignore_errors=True)
    return Side(round(seconds, 3), status_of(done.status_code, done.timed_out, done.killed), cpu_seconds(done.cpu_ms))


def cpu_seconds(cpu_ms: int | None) -> float | None:
    return None if cpu_ms is None else cpu_ms / 1000


def warm_run(server: WarmServer, pristine: Path, main_file: str, how: profiles.Invocation) -> Side:
    started = time.monotonic()
    try:
        done = server.convert_directory(pristine, main_file, timeout=how.timeout)
    except ServerFailed as exc:
        print(f"    the warm server failed ({exc}); started again", flush=True)
        server.start()
        return Side(round(time.monotonic() - started, 3), "server_failed")
    seconds = time.monotonic() - started
    return Side(round(seconds, 3), status_of(done.status_code, done.timed_out, done.killed), cpu_seconds(done.cpu_ms))


def cpu_text(side: Side) -> str:
    return "-" if side.cpu_seconds is None else f"{side.cpu_seconds:.2f}"


def gain(cold: float, warm: float) -> float:
    return cold / warm - 1 if warm > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REAL_CORPUS)
    parser.add_argument("--papers", type=int, default=0, help="the first N papers (sorted by name; 0: all)")
    parser.add_argument("--timeout", type=float, default=120, help="each conversion's timeout (a worker's: 300)")
    parser.add_argument("--memory-mb", type=int, default=engine.DEFAULT_MEMORY_MB)
    parser.add_argument("--only", action="extend", nargs="+", default=[], help="only entries whose name starts so")
    parser.add_argument(
        "--exclude", action="extend", nargs="+", default=[], help="leave out entries whose name starts so"
    )
    parser.add_argument("--json", type=Path, help="write every paper's times and statuses here")
    args = parser.parse_args()

    entries = sorted(path for path in args.corpus.iterdir() if path.name.endswith((".tar.gz", ".zip", ".tex")))
    if args.only:
        entries = [path for path in entries if path.name.startswith(tuple(args.only))]
    if args.exclude:
        entries = [path for path in entries if not path.name.startswith(tuple(args.exclude))]
    if args.papers:
        entries = entries[: args.papers]
    how = profiles.invocation(profiles.DEFAULT, roots=[], timeout=args.timeout, memory_mb=args.memory_mb)
    options = [
        "--format=html5", f"--dest={WARM_DESTINATION}", f"--log={engine.LOG_NAME}",
        f"--timeout={engine.latexmlc_timeout(how.timeout)}", *how.options,
    ]  # fmt: skip
    limits = engine.Limits(how.timeout, how.memory_mb)
    loadavg_before = Path("/proc/loadavg").read_text().strip()
    print(f"{len(entries)} papers from {args.corpus}, one at a time, timeout {how.timeout:.0f} s, "
          f"{how.executable} {' '.join(options)}", flush=True)  # fmt: skip
    print(f"before: /proc/loadavg {loadavg_before}; {harness.load_line()}", flush=True)
    steal = harness.StealWatch().start()

    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix("cortex-warm-bench-")))
    os.chmod(scratch, 0o711)  # noqa: S103 - passable, not listable, as the worker's task directory
    server = WarmServer.for_options(options, limits=limits, read_only=how.read_only)
    papers: list[Paper] = []
    began = time.monotonic()
    try:
        started = time.monotonic()
        server.start()
        print(f"warm server ready in {time.monotonic() - started:.2f} s (paid once a worker)", flush=True)
        print(f"{'':>7} {'paper':40s} {'cold s':>7s} {'warm s':>7s} {'gain':>7s} {'cold cpu':>8s} {'warm cpu':>8s}  "
              f"{'cold':10s} {'warm':10s}")  # fmt: skip
        for index, path in enumerate(entries):
            pristine = scratch / "paper"
            shutil.rmtree(pristine, ignore_errors=True)
            main_file = unpacked(path, pristine)
            order = ("cold", "warm") if index % 2 == 0 else ("warm", "cold")
            sides = {}
            for side in order:
                sides[side] = (
                    cold_run(pristine, main_file, scratch, how) if side == "cold"
                    else warm_run(server, pristine, main_file, how)
                )  # fmt: skip
            paper = Paper(path.name.removesuffix(".tar.gz"), sides["cold"], sides["warm"], order[0])
            papers.append(paper)
            mark = "" if paper.cold.status == paper.warm.status else "  STATUS DIFFERS"
            print(f"{index + 1:3d}/{len(entries):<3d} {paper.name[:40]:40s} {paper.cold.seconds:7.2f} "
                  f"{paper.warm.seconds:7.2f} {gain(paper.cold.seconds, paper.warm.seconds):+7.1%} "
                  f"{cpu_text(paper.cold):>8s} {cpu_text(paper.warm):>8s}  "
                  f"{paper.cold.status:10s} {paper.warm.status:10s}{mark}", flush=True)  # fmt: skip
            if args.json:  # kept as it grows: a run stopped halfway keeps what it measured
                args.json.write_text(json.dumps({"papers": [asdict(p) for p in papers]}, indent=1))
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report(papers, args, loadavg_before, steal, time.monotonic() - began)


def report(
    papers: list[Paper], args: argparse.Namespace, loadavg_before: str, steal: harness.StealWatch, wall: float
) -> None:
    loadavg_after = Path("/proc/loadavg").read_text().strip()
    differ = [paper.name for paper in papers if paper.cold.status != paper.warm.status]
    finished = [p for p in papers if "timeout" not in (p.cold.status, p.warm.status)]
    lines = []
    for label, chosen in (("all papers", papers), ("ended before the timeout on both sides", finished)):
        cold = sum(p.cold.seconds for p in chosen)
        warm = sum(p.warm.seconds for p in chosen)
        cold_cpu = sum(p.cold.cpu_seconds or 0 for p in chosen)
        warm_cpu = sum(p.warm.cpu_seconds or 0 for p in chosen)
        lines.append((label, len(chosen), cold, warm, gain(cold, warm), cold_cpu, warm_cpu, gain(cold_cpu, warm_cpu)))
        print(f"{label}: {len(chosen)} papers, cold {cold:.1f} s, warm {warm:.1f} s, "
              f"throughput gain cold/warm - 1 = {gain(cold, warm):+.2%}; CPU cold {cold_cpu:.1f} s, "
              f"warm {warm_cpu:.1f} s, {gain(cold_cpu, warm_cpu):+.2%}")  # fmt: skip
    print(f"statuses: {len(papers) - len(differ)} equal, {len(differ)} differ{': ' if differ else ''}"
          f"{', '.join(differ)}")  # fmt: skip
    print(f"after: /proc/loadavg {loadavg_after}; {steal.line()}; {wall:.0f} s in all")
    _, count, cold, warm, measured, cold_cpu, warm_cpu, _ = lines[0]
    verdict = "meets" if measured >= ADOPT_GAIN else "is below"
    saved = f"{(cold - warm) / max(count, 1):.2f} s wall, {(cold_cpu - warm_cpu) / max(count, 1):.2f} s CPU"
    print(f"SUMMARY {count} papers, timeout {args.timeout:.0f} s: cold {cold:.1f} s, warm {warm:.1f} s, gain "
          f"{measured:+.2%}, which {verdict} the {ADOPT_GAIN:.0%} bar for workers; saved a paper: {saved}; "
          f"{len(differ)} status differences")  # fmt: skip
    if args.json:
        summary = {"totals": [dict(zip(_TOTALS, line, strict=True)) for line in lines],
                   "status_differences": differ, "loadavg_before": loadavg_before, "loadavg_after": loadavg_after,
                   "steal": steal.share(), "wall_s": wall}  # fmt: skip
        args.json.write_text(json.dumps({"papers": [asdict(p) for p in papers], **summary}, indent=1))


if __name__ == "__main__":
    main()
