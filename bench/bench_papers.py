"""Real papers through the worker's own conversion path, without the service around it: each entry of a
corpus directory is packed as the dispatcher packs it (conversion.archive.pack_entry) and converted as a
worker converts it (conversion.worker.convert_task: the sandbox, the ImageMagick policy, every limit),
--parallel at a time. It measures an environment (the TeX Live packages and LaTeXML installed here) and a
profile on real papers: the status of each paper, its runtime and peak memory, and what kept each paper
from converting without errors.

For each paper it prints its status, runtime and peak resident size; then the counts by status, the
error-free share, runtime and peak memory at p50, p90 and max; then the causes: every error or fatal
message class (category:what) with the papers that have it, and for the papers that fail only for
missing packages, which ones. --json FILE keeps all of it, each paper's error and fatal messages
included, for comparing two environments.

Run: .venv/bin/python bench/bench_papers.py [--corpus ../shared/corpora/real] [--parallel 2] [--timeout 300]
     [--memory-mb 4096] [--latexmlc latexmlc] [--profile default|arxiv] [--without-bindings] [--json out.json]
     [--only NAME ...] [--exclude NAME ...] [--from NAME] [--to NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import zipfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from conversion import engine, profiles  # noqa: E402
from conversion.archive import inspect_entry, pack_entry  # noqa: E402
from conversion.choices import COMPLETED_NAMES  # noqa: E402
from conversion.logparse import parse_log  # noqa: E402
from conversion.worker import convert_task  # noqa: E402

REAL_CORPUS = PROJECT_ROOT.parent / "shared" / "corpora" / "real"
# Message categories that say a file the paper asks for is not installed (a package, a class, a figure).
MISSING = ("missing_file",)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def convert_one(path: Path, options: dict) -> dict:
    """One paper: packed, converted in the sandbox, its log parsed."""
    entry = inspect_entry(path, path.name)
    if entry.problem:
        return {"name": path.name, "status": "invalid", "detail": entry.detail or entry.problem}
    payload = pack_entry(path, entry.kind, path.name)
    watch = engine.Watch()
    started = time.monotonic()
    converted = convert_task(payload, watch=watch, **options)
    wall = time.monotonic() - started
    with zipfile.ZipFile(BytesIO(converted.result)) as archive:
        names = archive.namelist()
        log = archive.read("cortex.log")
        html = [name for name in names if name.endswith(".html")]
        body = archive.read(html[0]) if html else b""
    parsed = parse_log(log)
    status = COMPLETED_NAMES.get(parsed.status, "fatal")
    problems = [
        {"severity": m.severity, "category": m.category, "what": m.what, "details": m.details[:300]}
        for m in parsed.messages
        if m.severity in ("error", "fatal")
    ]
    loaded = sorted({m.what for m in parsed.messages if m.category == "loaded_file" and m.what.startswith("/usr/")})
    images = sum(1 for name in names if name.rsplit(".", 1)[-1].lower() in ("png", "jpg", "jpeg", "svg", "gif"))
    return {
        "name": path.name, "status": status, "runtime_s": round(wall, 2), "peak_rss_mb": watch.peak_rss // 2**20,
        "killed": converted.killed, "problems": problems, "images": images, "html_bytes": len(body),
        "bibliography": b"ltx_bibliography" in body, "figures_missing": body.count(b"ltx_missing_image"),
        "loaded": loaded,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REAL_CORPUS)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=engine.DEFAULT_TIMEOUT_SECONDS)
    parser.add_argument("--memory-mb", type=int, default=engine.DEFAULT_MEMORY_MB)
    parser.add_argument("--latexmlc", default="latexmlc", help="the engine: a name on PATH or a path under /usr")
    parser.add_argument("--profile", default="default", choices=sorted(profiles.PRESETS), help="a preset profile")
    parser.add_argument(
        "--without-bindings", action="store_true", help="leave the shipped bindings (@bindings) out of the profile"
    )
    parser.add_argument("--json", type=Path, help="write every paper's outcome here")
    parser.add_argument("--only", action="append", default=[], help="convert only entries with this name (repeat)")
    parser.add_argument("--exclude", action="append", default=[], help="leave out entries with this name (repeat)")
    parser.add_argument("--from", dest="first", default="", help="convert only entries from this name on (sorted)")
    parser.add_argument("--to", dest="last", default="", help="convert only entries before this name (sorted)")
    parser.add_argument("--label", default="", help="what this run measures, printed and kept in --json")
    args = parser.parse_args()

    entries = sorted(p for p in args.corpus.iterdir() if p.is_dir() or p.name.endswith((".gz", ".zip", ".tex")))
    if args.only:
        entries = [p for p in entries if any(p.name.startswith(name) for name in args.only)]
    entries = [p for p in entries if not any(p.name.startswith(name) for name in args.exclude)]
    entries = [p for p in entries if p.name >= args.first and (not args.last or p.name < args.last)]
    profile = profiles.PRESETS[args.profile].profile
    if args.without_bindings:
        profile = profiles.with_shipped_bindings(profile, False)
    how = profiles.invocation(
        profile, roots=[], timeout=args.timeout, memory_mb=args.memory_mb, latexmlc=args.latexmlc
    )  # fmt: skip
    options = {
        "timeout": how.timeout, "memory_mb": how.memory_mb, "latexmlc": how.executable, "extra_args": how.options,
        "read_only": how.read_only,
    }  # fmt: skip
    version = subprocess.run([args.latexmlc, "--VERSION"], capture_output=True, text=True, check=False)
    print(f"{len(entries)} papers from {args.corpus}, {args.parallel} at a time, timeout {how.timeout:.0f} s, "
          f"profile {args.profile} {' '.join(how.options)}; "
          f"{(version.stdout + version.stderr).strip()}; load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    lock = threading.Lock()
    outcomes: list[dict] = []
    started = time.monotonic()

    def run(path: Path) -> None:
        outcome = convert_one(path, options)
        with lock:
            outcomes.append(outcome)
            if args.json:  # kept as it grows: a run stopped halfway keeps what it measured
                args.json.write_text(json.dumps({"label": args.label, "papers": outcomes}, indent=1))
            print(f"{len(outcomes):3d}/{len(entries)} {outcome['status']:10s} {outcome.get('runtime_s', 0):7.1f} s "
                  f"{outcome.get('peak_rss_mb', 0):5d} MB  {outcome['name']}", flush=True)  # fmt: skip

    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(run, entries))
    wall = time.monotonic() - started
    report(outcomes, wall, args)


def report(outcomes: list[dict], wall: float, args: argparse.Namespace) -> None:
    counts: dict[str, int] = defaultdict(int)
    for outcome in outcomes:
        counts[outcome["status"]] += 1
    total = len(outcomes)
    print(f"\n{args.label}: {total} papers in {wall:.0f} s wall")
    print("  " + ", ".join(f"{name} {counts[name]}" for name in ("no_problem", "warning", "error", "fatal", "invalid")))
    error_free = counts["no_problem"] + counts["warning"]
    print(f"  error-free (no_problem or warning): {error_free}/{total} = {error_free / max(total, 1):.1%}")
    runtimes = [o["runtime_s"] for o in outcomes if "runtime_s" in o]
    peaks = [o["peak_rss_mb"] for o in outcomes if "peak_rss_mb" in o]
    for label, values, unit in (("runtime", runtimes, "s"), ("peak memory", peaks, "MB")):
        mean = statistics.fmean(values) if values else 0
        print(f"  {label}: p50 {percentile(values, 0.5):.1f} {unit}, p90 {percentile(values, 0.9):.1f} {unit}, "
              f"max {max(values, default=0):.1f} {unit}, mean {mean:.1f} {unit}")  # fmt: skip
    print(f"  papers with a bibliography: {sum(o.get('bibliography', False) for o in outcomes)}; "
          f"images in the results: {sum(o.get('images', 0) for o in outcomes)}; "
          f"figures missing: {sum(o.get('figures_missing', 0) for o in outcomes)}")  # fmt: skip
    classes: dict[str, set[str]] = defaultdict(set)
    for outcome in outcomes:
        if outcome["status"] in ("no_problem", "warning"):
            continue
        for problem in outcome.get("problems", []):
            classes[f"{problem['severity']}:{problem['category']}:{problem['what']}"].add(outcome["name"])
    print("  error and fatal classes of the papers that are not error-free (papers):")
    for name, papers in sorted(classes.items(), key=lambda item: (-len(item[1]), item[0]))[:60]:
        print(f"    {len(papers):3d}  {name}: {', '.join(sorted(p.removesuffix('.tar.gz') for p in papers))[:200]}")
    packages_report(outcomes)
    if args.json:
        args.json.write_text(json.dumps({"label": args.label, "wall_s": wall, "papers": outcomes}, indent=1))
        print(f"  written to {args.json}")


def packages_report(outcomes: list[dict]) -> None:
    """Which Debian packages the papers' loaded files (LaTeXML bindings, TeX Live styles) came from, with the
    number of papers that loaded something of each: what the environment must carry, measured."""
    paths = sorted({path for outcome in outcomes for path in outcome.get("loaded", [])})
    if not paths:
        return
    owner: dict[str, str] = {}
    for start in range(0, len(paths), 500):
        found = subprocess.run(["dpkg", "-S", *paths[start : start + 500]], capture_output=True, text=True, check=False)
        for line in found.stdout.splitlines():
            package, _, path = line.partition(": ")
            owner[path] = package.split(":")[0]
    papers: dict[str, set[str]] = defaultdict(set)
    for outcome in outcomes:
        for path in outcome.get("loaded", []):
            papers[owner.get(path, "(no package)")].add(outcome["name"])
    print("  Debian packages the papers loaded files from (papers):")
    for package, names in sorted(papers.items(), key=lambda item: (-len(item[1]), item[0])):
        print(f"    {len(names):3d}  {package}")


if __name__ == "__main__":
    main()
