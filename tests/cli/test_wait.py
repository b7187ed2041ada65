"""--wait follows a real job, run by a real Celery worker, to its end: a progress bar fed by the job's
progress, exit 0 when it succeeds and 1 when it fails."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from corpora.models import Corpus, Document
from jobs.actions import job_send
from jobs.models import Job
from tests.corpora.helpers import make_corpus_dir
from tests.support import start_celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _worker(process_tmpdir: Path, roots: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CORPUS_ROOTS", str(roots))  # the worker's corpus roots (child_env passes the environment)
    return start_celery_worker(tmpdir=process_tmpdir)


def _stop(process) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


@pytest.fixture
def worker(purge_broker, process_tmpdir, corpus_root, monkeypatch):
    process = _worker(process_tmpdir, corpus_root, monkeypatch)
    yield process
    _stop(process)


def test_wait_follows_a_real_import_job_to_its_end(ccs, worker, corpus_root):
    directory = make_corpus_dir(corpus_root, "big", documents=25)
    result = ccs("import", "big", str(directory), "--yes", "--wait")
    assert result.returncode == 0, result.stdout + result.stderr
    job = Job.objects.get(kind="corpus_import")
    assert job.state == "succeeded"
    assert f"job {job.uuid} (corpus_import) succeeded" in result.stdout
    assert "25/25" in result.stderr  # the bar's last state: the job's progress, current of total
    assert Document.objects.filter(corpus__name="big").count() == 25

    # --json with --wait: the job as it ended, as GET /api/jobs/{uuid} answers
    result = ccs("analyze", "--yes", "--wait", "--json")
    assert result.returncode == 0, result.stderr
    ended = json.loads(result.stdout)
    assert ended["kind"] == "maintenance_analyze" and ended["state"] == "succeeded"


def test_a_failed_job_exits_1(ccs, worker):
    job = Job.objects.create(kind="test_fail", actor="tester", params={"reason": "bad input on purpose"})
    job_send(job.pk)
    result = ccs("job", str(job.uuid), "--wait")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"ccs: job {job.uuid} (test_fail) failed: bad input on purpose" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_write_whose_job_fails_exits_1(ccs, purge_broker, process_tmpdir, corpus_root, tmp_path, monkeypatch):
    """The server accepts the directory (inside its corpus roots); the worker's roots do not hold it, so the
    import job fails there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    process = _worker(process_tmpdir, elsewhere, monkeypatch)
    try:
        result = ccs("import", "lost", str(make_corpus_dir(corpus_root, "lost")), "--yes", "--wait")
    finally:
        _stop(process)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(corpus_import) failed: " in result.stderr and "corpus roots" in result.stderr
    assert not Corpus.objects.filter(name="lost").exists()


def test_activate_wait_follows_the_job_then_the_run_to_its_close(ccs_start, worker, corpus_root, settings, tmp_path):
    """The activation job ends in a moment; --wait goes on until its run closes, as the results come in."""
    from corpora.models import Task
    from services.actions import service_register
    from tests.cli.test_watch import ingest, seen
    from tests.corpora.helpers import imported
    from tests.dispatcher.harness import CLEAN_LOG, wait_for
    from tests.runs.helpers import pair_tasks

    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "act", documents=3)
    service_register(name="tex_to_html", actor="tester")
    running = ccs_start("activate", "act", "tex_to_html", "--yes", "--wait", "--interval", "0.2")
    wait_for(seen(running, "0/3 done"), timeout=60, message=lambda: running.lines)
    assert running.process.poll() is None  # the job is over, the run is not: still waiting
    ingest(pair_tasks("act"), CLEAN_LOG, settings.RESULTS_DIR)
    code, stdout, stderr = running.finish()
    assert code == 0, stdout + stderr
    assert "(service_activate) succeeded" in stdout and "of act/tex_to_html closed after" in stdout, stdout
    assert "3/3 done (3 no_problem)" in stdout and Task.objects.filter(service__name="tex_to_html").count() == 3
