"""Package attribution on real papers: each paper converted as a worker converts it (bench_papers.py's path),
its `cortex.log` kept under --logs, parsed as the dispatcher parses it (conversion.logparse) and read for
package evidence (conversion.attribution); then the ranked package list the service shows per pair: for
each package or class, the papers that use it and their status mix, the papers where it is the only
missing or unsupported dependency, and the papers it alone keeps from being error-free.

A log already under --logs is read again instead of converting its paper, so a second run only ranks.

Run: .venv/bin/python bench/bench_attribution.py [--corpus ../shared/corpora/real] [--logs /tmp/ccs-attribution-logs]
     [--parallel 2] [--timeout 300] [--top 15] [--json out.json] [--papers PACKAGE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from conversion import engine, profiles  # noqa: E402
from conversion.archive import inspect_entry, pack_entry  # noqa: E402
from conversion.attribution import attribute, evidence_names  # noqa: E402
from conversion.choices import COMPLETED_NAMES, PackageFlag  # noqa: E402
from conversion.logparse import ParsedLog, parse_log  # noqa: E402
from conversion.worker import convert_task  # noqa: E402

REAL_CORPUS = PROJECT_ROOT.parent / "shared" / "corpora" / "real"


def convert_to_log(path: Path, logs: Path, options: dict) -> tuple[Path, float]:
    """One paper's `cortex.log`, converted into `logs` unless it is there already; and the seconds it took."""
    target = logs / (path.name + ".log")
    if target.exists():
        return target, 0.0
    entry = inspect_entry(path, path.name)
    started = time.monotonic()
    if entry.problem:
        log = f"Fatal:invalid:{entry.problem} {entry.detail}\nStatus:conversion:3\n".encode()
    else:
        converted = convert_task(pack_entry(path, entry.kind, path.name), watch=engine.Watch(), **options)
        with zipfile.ZipFile(BytesIO(converted.result)) as archive:
            log = archive.read("cortex.log")
    partial = target.with_suffix(".part")
    partial.write_bytes(log)
    partial.rename(target)
    return target, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REAL_CORPUS)
    parser.add_argument("--logs", type=Path, default=Path("/tmp/ccs-attribution-logs"))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=engine.DEFAULT_TIMEOUT_SECONDS)
    parser.add_argument("--memory-mb", type=int, default=engine.DEFAULT_MEMORY_MB)
    parser.add_argument("--profile", default="default", choices=sorted(profiles.PRESETS))
    parser.add_argument("--convert-only", action="store_true", help="keep the logs, rank nothing")
    parser.add_argument("--rank-only", action="store_true", help="rank the logs there are, convert nothing")
    parser.add_argument("--reverse", action="store_true", help="convert from the last paper (a second process)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    args.logs.mkdir(parents=True, exist_ok=True)
    entries = sorted(p for p in args.corpus.iterdir() if p.is_dir() or p.name.endswith((".gz", ".zip", ".tex")))
    how = profiles.invocation(
        profiles.PRESETS[args.profile].profile, roots=[], timeout=args.timeout, memory_mb=args.memory_mb,
    )  # fmt: skip
    options = {
        "timeout": how.timeout, "memory_mb": how.memory_mb, "latexmlc": how.executable, "extra_args": how.options,
        "read_only": how.read_only,
    }  # fmt: skip
    print(f"{len(entries)} papers from {args.corpus}, logs in {args.logs}, load {os.getloadavg()[0]:.2f}", flush=True)
    lock = threading.Lock()
    done: list[Path] = []

    def run(path: Path) -> None:
        log, seconds = convert_to_log(path, args.logs, options)
        with lock:
            done.append(log)
            print(f"{len(done):3d}/{len(entries)} {seconds:6.1f} s  {path.name}", flush=True)

    if not args.rank_only:
        with ThreadPoolExecutor(args.parallel) as pool:
            list(pool.map(run, entries[::-1] if args.reverse else entries))
    if args.convert_only:
        return
    logs = {p.name: args.logs / (p.name + ".log") for p in entries}
    rank_logs({name: parse_log(log.read_bytes()) for name, log in logs.items() if log.exists()}, args)


def rank_logs(parsed: dict[str, ParsedLog], args: argparse.Namespace) -> None:
    """The ranking as the service computes it (corpora.queries.packages): per package, its papers by status,
    the papers it is the only missing dependency of and the papers it clears, strongly and weakly."""
    statuses = Counter(COMPLETED_NAMES.get(log.status, "fatal") for log in parsed.values())
    print(f"\n{len(parsed)} papers: " + ", ".join(f"{name} {statuses[name]}" for name in COMPLETED_NAMES.values()))
    rows: dict[tuple[str, str], dict] = {}
    for name, log in parsed.items():
        for use in attribute(log.messages, log.status):
            row = rows.setdefault((use.kind, use.name), {"papers": [], "statuses": Counter(), "flags": 0})
            row["papers"].append((name, COMPLETED_NAMES.get(log.status, "fatal"), use.flags))
            row["statuses"][COMPLETED_NAMES.get(log.status, "fatal")] += 1
            row["flags"] |= use.flags

    def count(row: dict, flag: PackageFlag) -> int:
        return sum(1 for _, _, flags in row["papers"] if flags & flag)

    ranked = sorted(
        rows.items(),
        key=lambda item: (-count(item[1], PackageFlag.CLEARS), -count(item[1], PackageFlag.CLEARS_WEAK),
                          -count(item[1], PackageFlag.ONLY), -len(item[1]["papers"]), item[0]),
    )  # fmt: skip
    print(f"{len(rows)} packages and classes; the first {args.top} (clears, clears weak, only missing, papers):")
    print(f"  {'package':28s} {'clears':>6s} {'weak':>5s} {'only':>5s} {'papers':>6s}  np/w/e/f   evidence")
    for (kind, package), row in ranked[: args.top]:
        mix = "/".join(str(row["statuses"][key]) for key in ("no_problem", "warning", "error", "fatal"))
        print(f"  {package + (' (class)' if kind == 'class' else ''):28s} {count(row, PackageFlag.CLEARS):6d}"
              f" {count(row, PackageFlag.CLEARS_WEAK):5d} {count(row, PackageFlag.ONLY):5d} {len(row['papers']):6d}"
              f"  {mix:10s} {' '.join(evidence_names(row['flags']))}")  # fmt: skip
    for (_, package), row in ranked[: args.top]:
        named = [(n, s, f) for n, s, f in row["papers"] if f & (PackageFlag.CLEARS_WEAK | PackageFlag.ONLY)]
        if named:
            print(f"  {package}: " + "; ".join(
                f"{n.removesuffix('.tar.gz')} {s}{' clears' if f & PackageFlag.CLEARS else ''}"
                f"{' clears-weak' if f & PackageFlag.CLEARS_WEAK and not f & PackageFlag.CLEARS else ''}"
                f"{' only' if f & PackageFlag.ONLY else ''}" for n, s, f in sorted(named)
            ))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps([
            {"kind": kind, "package": package, "papers": [{"name": n, "status": s, "flags": f} for n, s, f in papers]}
            for (kind, package), papers in ((key, row["papers"]) for key, row in ranked)
        ], indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
