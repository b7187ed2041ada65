"""Dataset export of 100,000 converted documents, next to a plain `zip -r` of the same result files on the
same disk in the same run (goal: at least 80% of its MB/s), with the export process's peak memory (goal:
under 200 MB).

The corpus, its tex_to_html tasks (completed, statuses spread over no_problem..fatal, arXiv-style names
over 120 months) and one small result ZIP per task (an HTML page and a stored PNG, as a worker writes
them) are generated once and reused while their marker matches; generation is not measured. Each
measurement first reads every result file once (so both sides start with a warm page cache), then runs
`zip -r -q` of the pair's result directory, then the export job in a child process (`--child`), whose
peak RSS comes from wait4. MB/s is the bytes of the result files read per second of wall time; the
export's time is the job body (its started/finished; the goal is judged on it, as a running Celery worker
runs the job) and, for reference, the child's whole life (Python and Django start-up included).

Run: .venv/bin/python bench/bench_export.py [--documents N] [--group-by month|severity|none] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import harness

harness.configure("ccs_export_bench", 10, Path("/tmp/ccs-export-bench"))
os.environ.setdefault("EXPORT_ROOT", str(harness.BENCH_ROOT / "exports"))

TARGET_RATIO = 0.80
TARGET_PEAK_MB = 200.0
GENERATOR_VERSION = "1"
WORDS = [
    "theorem", "lemma", "proof", "equation", "integral", "manifold", "operator", "spectrum", "boundary", "kernel",
    "measure", "space", "group", "ring", "field", "module", "sheaf", "functor", "category", "limit", "sequence",
]  # fmt: skip


def _html(i: int, rng: random.Random) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(600 + i % 400))
    return (
        f'<!DOCTYPE html><html><head><title>Paper {i}</title><link rel="stylesheet" href="LaTeXML.css"></head>'
        f'<body><div class="ltx_page_main"><article class="ltx_document"><h1 class="ltx_title">Paper {i}</h1>'
        f'<p class="ltx_p">{text}</p><math alttext="x^{{{i}}}"><msup><mi>x</mi><mn>{i}</mn></msup></math>'
        "</article></div></body></html>"
    )


def corpus_generate(name: str, documents: int) -> tuple[int, int, float | None]:
    """The corpus, its tasks and result files (once); returns (corpus id, service id, seconds or None)."""
    from django.db import connection, transaction

    from corpora.models import Activation, Corpus
    from corpora.results import result_path
    from services.actions import service_register
    from services.models import Service

    marker = harness.RESULTS_DIR / f".generated-{name}"
    expected = f"v{GENERATOR_VERSION} documents={documents}\n"
    corpus = Corpus.objects.filter(name=name).first()
    if corpus is not None and marker.is_file() and marker.read_text() == expected:
        return corpus.pk, Service.objects.get(name="tex_to_html").pk, None
    harness.corpus_delete_if_exists(name)
    service = Service.objects.filter(name="tex_to_html").first() or service_register(name="tex_to_html", actor="bench")
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        corpus = Corpus.objects.create(name=name, path=str(harness.CORPUS_ROOT / name), state="ready")
        Activation.objects.create(corpus=corpus, service=service, actor="bench")
        # New-style arXiv names over 120 months (2015-01 .. 2024-12), a few old-style and plain ones.
        cursor.execute(
            "INSERT INTO corpora_document (corpus_id, name, entry, kind, main_file, created_at)"
            " SELECT %s, n, n || '.tar.gz', 'tar', 'main.tex', now() FROM ("
            "  SELECT CASE WHEN i %% 50 = 0 THEN 'math' || lpad((i %% 9999)::text, 7, '0')"
            "              WHEN i %% 97 = 0 THEN 'notes-' || i"
            "              ELSE (15 + i %% 10)::text || lpad((1 + (i / 10) %% 12)::text, 2, '0') || '.'"
            "                   || lpad(i::text, 5, '0') END || '' AS n, i"
            "  FROM generate_series(0, %s - 1) AS i) names",
            [corpus.pk, documents],
        )
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status, attempts)"
            " SELECT %s, %s, d.id, -1 - (d.id %% 4), 1 FROM corpora_document d WHERE d.corpus_id = %s",
            [corpus.pk, service.pk, corpus.pk],
        )
        cursor.execute(
            "SELECT t.id FROM corpora_task t WHERE t.corpus_id = %s AND t.service_id = %s", [corpus.pk, service.pk]
        )
        task_ids = [row[0] for row in cursor.fetchall()]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE corpora_document")
        cursor.execute("ANALYZE corpora_task")
    directory = harness.RESULTS_DIR / str(corpus.pk) / str(service.pk)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    rng = random.Random(16)
    png = b"\x89PNG\r\n\x1a\n" + bytes(rng.getrandbits(8) for _ in range(2048))
    for index, task_id in enumerate(task_ids):
        with zipfile.ZipFile(result_path(harness.RESULTS_DIR, corpus.pk, service.pk, task_id), "w") as result:
            result.writestr("paper.html", _html(index, rng), compress_type=zipfile.ZIP_DEFLATED)
            result.writestr("x1.png", png, compress_type=zipfile.ZIP_STORED)
    marker.write_text(expected)
    return corpus.pk, service.pk, time.perf_counter() - started


def _files_bytes(directory: Path) -> tuple[int, int]:
    files = size = 0
    for entry in os.scandir(directory):
        files += 1
        size += entry.stat().st_size
    return files, size


def _warm(directory: Path) -> None:
    """Read every result file once, so that neither side pays for the first read from disk."""
    for entry in os.scandir(directory):
        with open(entry.path, "rb") as stream:
            while stream.read(1 << 20):
                pass


def _zip_baseline(directory: Path, target: Path) -> float:
    target.unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run(["zip", "-r", "-q", str(target), "."], cwd=directory, check=True)
    return time.perf_counter() - started


def _export_child(job_id: str) -> tuple[float, float, str]:
    """Run the export job in a child process; (wall seconds, peak RSS in MB, final state)."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, "--child", job_id], env=os.environ.copy())
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        harness.fail(f"the export child exited with {child.returncode}")
    from jobs.models import Job

    return wall, usage.ru_maxrss / 1024, Job.objects.get(pk=job_id).state


def child_main(job_id: str) -> None:
    harness.django_ready()
    from jobs.runner import job_run

    job_run(job_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--group-by", default="month", choices=("month", "severity", "none"))
    parser.add_argument("--rounds", type=int, default=2, help="zip -r then export, this many times")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    harness.quiet_arguments(parser, wait=600)
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        return

    harness.setup()
    from django.conf import settings

    from corpora.export.actions import dataset_export
    from jobs.models import Job

    name = f"bench-export-{args.documents}"
    corpus_id, service_id, generated = corpus_generate(name, args.documents)
    print(f"corpus {name}: {'reused' if generated is None else f'generated in {generated:.1f} s (not measured)'}")
    directory = harness.RESULTS_DIR / str(corpus_id) / str(service_id)
    files, size = _files_bytes(directory)
    megabytes = size / 1e6
    print(f"result files: {files} ZIPs, {megabytes:.1f} MB in {directory}")
    out_root = Path(settings.EXPORT_ROOT)
    out_root.mkdir(parents=True, exist_ok=True)
    baseline_zip = harness.BENCH_ROOT / "baseline.zip"
    harness.quiet_wait(args.max_load, args.wait)
    severities = ["no_problem", "warning", "error", "fatal"]
    rows = []
    for round_index in range(args.rounds):
        _warm(directory)
        zip_seconds = _zip_baseline(directory, baseline_zip)
        out = f"bench-{args.group_by}-{round_index}"
        shutil.rmtree(out_root / out, ignore_errors=True)
        _warm(directory)
        job = dataset_export(corpus=name, service="tex_to_html", group_by=args.group_by, severities=severities,
                             actor="bench", out=out, send=False)  # fmt: skip
        wall, peak_mb, state = _export_child(str(job.pk))
        job = Job.objects.get(pk=job.pk)
        if state != "succeeded" or job.result["documents"] != args.documents:
            harness.fail(f"the export ended {state}: {job.message} {job.result}")
        body = (job.finished_at - job.started_at).total_seconds()
        rows.append((zip_seconds, body, wall, peak_mb, job.result))
        print(
            f"round {round_index + 1}: zip -r {zip_seconds:6.2f} s = {megabytes / zip_seconds:6.1f} MB/s"
            f" ({baseline_zip.stat().st_size / 1e6:.1f} MB) | export job {body:6.2f} s = {megabytes / body:6.1f} MB/s,"
            f" child {wall:6.2f} s = {megabytes / wall:6.1f} MB/s ({job.result['bytes'] / 1e6:.1f} MB in"
            f" {job.result['archives']} archives) | ratio job/zip {zip_seconds / body:.2f},"
            f" child/zip {zip_seconds / wall:.2f} | peak RSS {peak_mb:.0f} MB"
        )
    best_zip = min(r[0] for r in rows)
    best_body = min(r[1] for r in rows)
    best_wall = min(r[2] for r in rows)
    peak = max(r[3] for r in rows)
    # The job body is the export as a Celery worker (already started) runs it; the child's whole life adds
    # Python and Django start-up and the database connection, printed for reference.
    ratio = best_zip / best_body
    print(
        f"best: zip -r {megabytes / best_zip:.1f} MB/s; export {megabytes / best_body:.1f} MB/s (job),"
        f" {megabytes / best_wall:.1f} MB/s (child process); ratio job/zip {ratio:.2f},"
        f" child/zip {best_zip / best_wall:.2f}; peak RSS {peak:.0f} MB"
    )
    print(f"end: {harness.load_line()}")
    print(f"goal ratio >= {TARGET_RATIO:.0%}: {'met' if ratio >= TARGET_RATIO else 'MISSED'};"
          f" goal peak < {TARGET_PEAK_MB:.0f} MB: {'met' if peak < TARGET_PEAK_MB else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
