#!/usr/bin/env python3
"""Faults on a running system, and how long it takes to recover from each.

Starts `manage.py up` on embedded PostgreSQL and Redis of its own (its own VAR_DIR, ports, results and
corpus directories, the results directory on a tmpfs of its own so that a full disk is a real one), and
converts documents of the sample corpus (real LaTeXML in the sandbox) once quietly, then once per fault,
each on a fresh copy of the corpus:

  worker       SIGKILL every `manage.py worker` (up restarts them)
  dispatcher   SIGKILL the dispatcher and its sink (up restarts it)
  both         the two at once
  postgresql   SIGKILL the embedded PostgreSQL's postmaster
  redis        SIGKILL the embedded Redis
  disk         fill the results disk to the last byte for --disk-seconds, then free it

Each fault comes once `--before` results of the run are in. For each it prints the seconds from the fault
to the first new result and to every task final, and checks the targets: every task final exactly once
(one result archive per task, no partial file, no message twice), with the status the quiet run gave it,
and every task final within 90 s of the fault plus what the quiet run took for the tasks left.

    .venv/bin/python bench/bench_chaos.py [--documents 24] [--faults worker,dispatcher,...] [--json out.json]

The first --documents of the sample corpus by name, without --exclude (complex_si, which runs to its timeout).

Needs root (the tmpfs) and the system packages `make run` installs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from harness import PROJECT_ROOT, SAMPLE_CORPUS, free_port

FAULTS = ("worker", "dispatcher", "both", "postgresql", "redis", "disk")
TARGET_SECONDS = 90
ROOT = Path(os.environ.get("BENCH_ROOT", "/tmp/ccs-bench-chaos"))


def environment(web_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        VAR_DIR=str(ROOT / "var"), TMPDIR=str(ROOT / "tmp"), RESULTS_DIR=str(ROOT / "results"),
        CORPUS_ROOTS=str(ROOT / "corpora"), PYTHONUNBUFFERED="1", LOG_LEVEL="WARNING",
        DISPATCHER_VENTILATOR_PORT=str(free_port()), DISPATCHER_SINK_PORT=str(free_port()),
        WEB_PORT=str(web_port),
        # The sink holds results back below this much free space: the tmpfs is small, and the disk fault fills it.
        RESULTS_MIN_FREE_MB="32",
    )  # fmt: skip
    return env


def prepare(results_mb: int) -> None:
    """Fresh directories; the results directory a tmpfs of `results_mb`."""
    results = ROOT / "results"
    if results.is_mount():
        subprocess.run(["umount", str(results)], check=True)
    shutil.rmtree(ROOT, ignore_errors=True)
    for name in ("var", "tmp", "results", "corpora"):
        (ROOT / name).mkdir(parents=True)
    os.chmod(ROOT / "tmp", 0o1777)  # noqa: S103  (the sandbox's user converts there, as in /tmp)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={results_mb}m", "tmpfs", str(results)], check=True)


def up_start(env: dict[str, str], workers: int) -> subprocess.Popen:
    log = open(ROOT / "up.log", "w")  # noqa: SIM115  (closed with the process)
    return subprocess.Popen(
        [sys.executable, "manage.py", "up", "--no-demo", "--workers", str(workers), "--port", env["WEB_PORT"]],
        cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def wait(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the database may be down in the middle of a fault
            from django.db import connections

            for connection in connections.all(initialized_only=True):
                with _quiet():
                    connection.close()
            value = None
        if value:
            return value
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}; see {ROOT / 'up.log'}")


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


def descendants(up: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(up.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def find(up: subprocess.Popen, *words: str) -> list[psutil.Process]:
    found = []
    for process in descendants(up):
        with _quiet():
            line = " ".join(process.cmdline())
            if all(word in line for word in words):
                found.append(process)
    return found


def group_kill(processes: list[psutil.Process]) -> int:
    groups = set()
    for process in processes:
        with _quiet():
            groups.add(os.getpgid(process.pid))
    for group in groups:
        with _quiet():
            os.killpg(group, signal.SIGKILL)
    return len(groups)


def postmaster_pid() -> int:
    return int((ROOT / "var" / "pgdata" / "postmaster.pid").read_text().split()[0])


def corpus_make(name: str, documents: list[Path]) -> None:
    from corpora.actions.corpora import corpus_import, service_activate
    from jobs.runner import job_run

    directory = ROOT / "corpora" / name
    directory.mkdir()
    for source in documents:
        shutil.copytree(source, directory / source.name)
    job_run(corpus_import(name=name, path=str(directory), actor="bench", send=False).pk)
    job_run(service_activate(corpus_name=name, service_name="tex_to_html", actor="bench", send=False).pk)


def statuses(name: str) -> dict[str, int]:
    from corpora.models import Task

    rows = Task.objects.filter(corpus__name=name, service__name="tex_to_html").values_list("document__name", "status")
    return dict(rows)


def final_count(name: str) -> int:
    return sum(1 for status in statuses(name).values() if status < 0)


def message_counts(name: str) -> dict[str, int]:
    """Messages per document of a corpus: a result applied twice would show as more than the quiet run's."""
    from django.db.models import Count

    from corpora.models import LogMessage

    rows = (
        LogMessage.objects.filter(corpus__name=name, service__name="tex_to_html")
        .values_list("task__document__name")
        .annotate(n=Count("task_id"))
    )
    return dict(rows)


def once_checks(name: str, quiet: dict[str, int]) -> list[str]:
    """What breaks 'every task final exactly once, with the quiet run's status'."""
    from corpora.models import Corpus, Task

    problems = []
    now = statuses(name)
    differ = {doc: (quiet.get(doc), status) for doc, status in now.items() if quiet.get(doc) != status}
    if differ:
        problems.append(f"statuses differ from the quiet run's (quiet, now): {differ}")
    corpus = Corpus.objects.get(name=name)
    tasks = set(Task.objects.filter(corpus=corpus, service__name="tex_to_html").values_list("pk", flat=True))
    archives = [p for p in (ROOT / "results" / str(corpus.pk)).rglob("*") if p.is_file()]
    names = sorted(p.name for p in archives)
    if names != sorted(f"{task}.zip" for task in tasks):
        problems.append(f"archives {len(names)} for {len(tasks)} tasks (or not one each): {names[:5]}")
    counts = message_counts(name)
    quiet_counts = message_counts("quiet")
    doubled = {doc: (quiet_counts.get(doc, 0), n) for doc, n in counts.items() if n != quiet_counts.get(doc, 0)}
    if doubled:
        problems.append(f"messages per document differ from the quiet run's (quiet, now): {doubled}")
    return problems


def fault(kind: str, up: subprocess.Popen, disk_seconds: float) -> None:
    if kind in ("worker", "both"):
        assert group_kill(find(up, "manage.py", "worker")), "no worker to kill"
    if kind in ("dispatcher", "both"):
        assert group_kill(find(up, "manage.py", "dispatcher")), "no dispatcher to kill"
    if kind == "postgresql":
        os.kill(postmaster_pid(), signal.SIGKILL)
    if kind == "redis":
        killed = [p for p in descendants(up) if "redis-server" in " ".join(p.cmdline())]
        assert killed, "no Redis to kill"
        for process in killed:
            process.kill()
    if kind == "disk":
        results = ROOT / "results"
        filler = results / ".filler"
        try:  # every byte of the tmpfs: the last write and the close end in ENOSPC
            with open(filler, "wb") as out:
                while True:
                    out.write(b"\0" * (1 << 20))
                    out.flush()
        except OSError:
            pass
        time.sleep(disk_seconds)  # the fault lasts this long: the bench's own clock, not a wait on a condition
        filler.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=24)
    parser.add_argument(
        "--exclude", default="complex_si", help="documents left out (comma-separated): complex_si runs to its timeout"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--before", type=int, default=4, help="results in before each fault")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--disk-seconds", type=float, default=20.0)
    parser.add_argument("--results-mb", type=int, default=256)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    faults = [name for name in args.faults.split(",") if name]
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise SystemExit(f"unknown fault(s): {', '.join(sorted(unknown))}; known: {', '.join(FAULTS)}")
    excluded = set(args.exclude.split(","))
    documents = sorted(p for p in SAMPLE_CORPUS.iterdir() if p.is_dir() and p.name not in excluded)[: args.documents]
    if not documents:
        raise SystemExit(f"no documents under {SAMPLE_CORPUS}")

    prepare(args.results_mb)
    env = environment(free_port())
    os.environ.update({k: env[k] for k in ("VAR_DIR", "RESULTS_DIR", "CORPUS_ROOTS", "TMPDIR")})
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))  # runs `finally`
    up = up_start(env, args.workers)
    rows: list[dict[str, Any]] = []
    quiet_seconds = 0.0
    try:
        wait(lambda: (ROOT / "var" / "pgdata" / "postmaster.pid").exists() and find(up, "dispatcher"), 180, "up")
        sys.path.insert(0, str(PROJECT_ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from services.actions import service_register
        from services.models import Service

        wait(lambda: Service.objects.filter(name="init").exists(), 120, "the migrations")
        if not Service.objects.filter(name="tex_to_html").exists():
            service_register(name="tex_to_html", actor="bench")

        started = time.monotonic()
        corpus_make("quiet", documents)
        wait(lambda: final_count("quiet") == len(documents), 900, "the quiet run")
        quiet_seconds = time.monotonic() - started
        quiet = statuses("quiet")
        per_task = quiet_seconds / len(documents)
        print(f"quiet run: {len(documents)} documents in {quiet_seconds:.1f} s ({per_task:.2f} s a task)")

        for kind in faults:
            name = f"chaos-{kind}"
            corpus_make(name, documents)
            wait(lambda name=name: final_count(name) >= args.before, 600, f"{args.before} results of {name}")
            before = final_count(name)
            at = time.monotonic()
            fault(kind, up, args.disk_seconds)
            first = wait(lambda name=name, n=before: final_count(name) > n and time.monotonic(), 900, "a new result")
            last = wait(lambda name=name: final_count(name) == len(documents) and time.monotonic(), 900, "all final")
            problems = once_checks(name, quiet)
            left_quiet = (len(documents) - before) * per_task
            row = {
                "fault": kind, "final_before": before, "first_result_seconds": round(first - at, 1),
                "all_final_seconds": round(last - at, 1), "quiet_seconds_for_the_rest": round(left_quiet, 1),
                "recovery_seconds": round(max(last - at - left_quiet, 0.0), 1), "problems": problems,
            }  # fmt: skip
            row["met"] = not problems and row["recovery_seconds"] <= TARGET_SECONDS
            rows.append(row)
            print(
                f"{kind:<11} first result {row['first_result_seconds']:>6.1f} s,"
                f" all final {row['all_final_seconds']:>6.1f} s (quiet: {left_quiet:.0f} s for the rest;"
                f" recovery {row['recovery_seconds']:.0f} s)"
                f" {'met' if row['met'] else 'MISSED'}{'; ' + '; '.join(problems) if problems else ''}",
                flush=True,
            )  # fmt: skip
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
        subprocess.run(["umount", str(ROOT / "results")], check=False)
    if args.json:
        args.json.write_text(json.dumps({"documents": len(documents), "quiet_seconds": quiet_seconds, "faults": rows}))
    if not all(row["met"] for row in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
