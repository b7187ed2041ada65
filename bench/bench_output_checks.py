"""The output checks' cost and findings on real papers: each paper is converted as a worker converts it
(conversion.worker.convert_task, as bench_papers.py does) and its result ZIP kept under --keep; then the
checks (conversion.output_checks.check_conversion, the call the worker makes after each conversion) run
on every kept result against the paper's unpacked source, timed, and compared with the conversion's own
runtime (the log's `Info:runtime_ms`).

It prints, per paper, its status, conversion runtime, the checks' time and ratio and the checks that
fired; then the ratio over all papers (the checks' time summed over the conversions' time summed), the
worst paper's ratio, how many papers each check flags, and the machine's load while it measured.

Run: .venv/bin/python bench/bench_output_checks.py [--corpus ../shared/corpora/real] [--keep DIR]
     [--parallel 2] [--timeout 300] [--reuse] [--repeat 5] [--only NAME ...] [--json out.json]

--reuse skips converting the papers whose result is already under --keep (a result is kept as it comes,
so a run stopped halfway is resumed); --repeat times each paper's checks that many times and keeps the
median.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path, PurePosixPath

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from conversion import engine, profiles  # noqa: E402
from conversion.archive import inspect_entry, pack_entry  # noqa: E402
from conversion.choices import COMPLETED_NAMES, LatexmlStatus  # noqa: E402
from conversion.logparse import parse_log, status_code_of  # noqa: E402
from conversion.worker import convert_task, unpack_payload  # noqa: E402

REAL_CORPUS = PROJECT_ROOT.parent / "shared" / "corpora" / "real"
DEFAULT_KEEP = Path("/tmp/ccs-output-checks-bench")
_RUNTIME = re.compile(rb"^Info:runtime_ms:([0-9]{1,12})", re.MULTILINE)


def entries_of(corpus: Path, only: list[str]) -> list[Path]:
    entries = sorted(p for p in corpus.iterdir() if p.is_dir() or p.name.endswith((".gz", ".zip", ".tex")))
    return [p for p in entries if not only or any(p.name.startswith(name) for name in only)]


def payload_of(path: Path) -> bytes | None:
    entry = inspect_entry(path, path.name)
    return None if entry.problem else pack_entry(path, entry.kind, path.name)


def convert_all(entries: list[Path], keep: Path, options: dict, parallel: int, reuse: bool) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    todo = [p for p in entries if not (reuse and (keep / f"{p.name}.zip").exists())]
    print(f"converting {len(todo)} of {len(entries)} papers, {parallel} at a time; load {load()}", flush=True)
    lock = threading.Lock()
    done = [0]

    def run(path: Path) -> None:
        payload = payload_of(path)
        if payload is None:
            return
        converted = convert_task(payload, **options)
        (keep / f"{path.name}.zip.part").write_bytes(converted.result)
        (keep / f"{path.name}.zip.part").rename(keep / f"{path.name}.zip")
        with lock:
            done[0] += 1
            print(f"  {done[0]:3d}/{len(todo)} converted {path.name}; load {load()}", flush=True)

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(run, todo))


def check_one(path: Path, keep: Path, repeat: int) -> dict | None:
    """One paper's kept result checked against its source, `repeat` times; the median time."""
    from conversion.output_checks import check_conversion

    kept = keep / f"{path.name}.zip"
    payload = payload_of(path)
    if payload is None or not kept.exists():
        return None
    with tempfile.TemporaryDirectory(prefix="ccs-output-checks-") as scratch:
        source = Path(scratch) / "source"
        unpack_payload(payload, source)
        main = PurePosixPath(inspect_entry(source, "payload").main_file)
        output = Path(scratch) / "output"
        output.mkdir()
        with zipfile.ZipFile(BytesIO(kept.read_bytes())) as archive:
            log = archive.read(engine.LOG_NAME)
            for name in archive.namelist():
                if name != engine.LOG_NAME and not name.endswith("/"):
                    target = output / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(name))
        code = status_code_of(log)
        if code is None or code >= LatexmlStatus.FATAL:
            return {"name": path.name, "status": "fatal", "runtime_ms": _runtime_ms(log), "checks_ms": 0.0,
                    "html": False, "flags": [], "lines": []}  # fmt: skip
        html = any(output.glob("*.html"))
        times, lines = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            lines = check_conversion(source / main.parent, main.name, output, status_code=code, root=source)
            times.append(time.perf_counter() - started)
    runtime_ms = _runtime_ms(log)
    parsed = parse_log(log)
    return {
        "name": path.name, "status": COMPLETED_NAMES.get(parsed.status, "fatal"), "runtime_ms": runtime_ms,
        "checks_ms": statistics.median(times) * 1000, "html": html, "lines": lines,
        "flags": [line.split(" ", 1)[0].split(":", 1)[1] for line in lines if not line.startswith("Status:")],
    }  # fmt: skip


def _runtime_ms(log: bytes) -> int:
    runtimes = _RUNTIME.findall(log)
    return int(runtimes[-1]) if runtimes else 0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REAL_CORPUS)
    parser.add_argument("--keep", type=Path, default=DEFAULT_KEEP, help="where the result ZIPs are kept")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=engine.DEFAULT_TIMEOUT_SECONDS)
    parser.add_argument("--memory-mb", type=int, default=engine.DEFAULT_MEMORY_MB)
    parser.add_argument("--reuse", action="store_true", help="do not convert papers already kept")
    parser.add_argument("--convert-only", action="store_true", help="convert, keep, and stop")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", action="append", default=[], help="only entries with this name (repeat)")
    parser.add_argument("--json", type=Path, help="write every paper's outcome here")
    args = parser.parse_args()

    entries = entries_of(args.corpus, args.only)
    how = profiles.invocation(
        profiles.PRESETS["default"].profile, roots=[], timeout=args.timeout, memory_mb=args.memory_mb
    )
    options = {
        "timeout": how.timeout, "memory_mb": how.memory_mb, "latexmlc": how.executable, "extra_args": how.options,
        "read_only": how.read_only,
    }  # fmt: skip
    convert_all(entries, args.keep, options, args.parallel, args.reuse)
    if args.convert_only:
        return
    print(f"checking {len(entries)} kept results, median of {args.repeat}; load {load()}", flush=True)
    outcomes = [o for o in (check_one(p, args.keep, args.repeat) for p in entries) if o is not None]
    for o in outcomes:
        ratio = o["checks_ms"] / o["runtime_ms"] if o["runtime_ms"] else 0.0
        print(f"  {o['status']:10s} {o['runtime_ms'] / 1000:7.1f} s  checks {o['checks_ms']:7.2f} ms "
              f"({ratio:.4%})  {o['name']}  {' '.join(o['flags'])}")  # fmt: skip
    report(outcomes)
    if args.json:
        args.json.write_text(json.dumps(outcomes, indent=1))


def report(outcomes: list[dict]) -> None:
    """The checks' time against the conversions' (all papers; the papers checked, those that did not end fatal,
    as the worker checks only those), the worst paper, and the papers each check flags."""
    checked = [o for o in outcomes if o["status"] != "fatal"]
    print(f"\n{len(outcomes)} papers, {len(checked)} checked (not fatal), "
          f"{sum(o['html'] for o in outcomes)} with an HTML result; load {load()}")  # fmt: skip
    for label, group in (("all papers", outcomes), ("papers checked", checked)):
        checks, runtime = sum(o["checks_ms"] for o in group), sum(o["runtime_ms"] for o in group)
        print(
            f"  {label}: checks {checks:.1f} ms of {runtime / 1000:.1f} s converting = {checks / max(runtime, 1):.4%}"
        )
    if checked:
        worst = max(checked, key=lambda o: o["checks_ms"] / max(o["runtime_ms"], 1))
        print(f"  worst paper: {worst['name']}, {worst['checks_ms']:.2f} ms of {worst['runtime_ms'] / 1000:.1f} s "
              f"({worst['checks_ms'] / max(worst['runtime_ms'], 1):.4%}); slowest checks "
              f"{max(o['checks_ms'] for o in checked):.2f} ms")  # fmt: skip
    flagged = Counter(flag for o in outcomes for flag in set(o["flags"]))
    print("  papers each check flags: " + (", ".join(f"{k} {v}" for k, v in sorted(flagged.items())) or "none"))
    for o in outcomes:
        for line in o["lines"]:
            print(f"    {o['name']}: {line[:240]}")


if __name__ == "__main__":
    main()
