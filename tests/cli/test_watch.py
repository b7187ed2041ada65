"""`ccs watch` and `ccs rerun --wait` follow a real run to its close: the results applied as the
dispatcher's sink applies them (dispatcher.ingest.result_ingest, which closes a drained run), progress
lines with the rate and the ETA, exit 0 when the run closes, and with --fail-on-new-failures exit 3 when
the closed run left documents failed that were better before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.utils import timezone

from corpora.models import Task
from dispatcher.ingest import RawResult, result_ingest
from services.actions import workers_tally_add
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import CLEAN_LOG, result_zip, wait_for
from tests.runs.helpers import pair_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CORPUS, SERVICE = "w", "tex_to_html"
FATAL_LOG = "Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\n"
PROGRESS = re.compile(r"(\d+)/(\d+) done .*, ([\d.e+-]+) tasks/s, ETA (\S+)")


def ingest(tasks: list[Task], log: str, results_dir: Path) -> None:
    """Lease the tasks to worker w1 (a live worker of the service, as the dispatcher counts it) and apply a
    result for each, as the sink does."""
    now = timezone.now()
    workers_tally_add(identities=["w1"], service_ids=[tasks[0].service_id], dispatched=[len(tasks)],
                      returned=[len(tasks)], first_seen=[now], last_seen=[now])  # fmt: skip
    Task.objects.filter(pk__in=[task.pk for task in tasks]).update(status=77)
    batch = [RawResult("w1", SERVICE, str(task.pk), result_zip(log)) for task in tasks]
    result_ingest(batch, service_ids={SERVICE: tasks[0].service_id}, results_dir=results_dir, max_bytes=10**7)


def seen(running, pattern: str):
    return lambda: any(pattern in line for line in running.lines)


@pytest.fixture
def results_dir(tmp_path: Path, settings) -> Path:
    settings.RESULTS_DIR = tmp_path / "results"
    return settings.RESULTS_DIR


def test_watch_follows_a_run_to_its_close_with_rate_and_eta(ccs, ccs_start, corpus_root, results_dir):
    imported(corpus_root, CORPUS, documents=6)
    activated(CORPUS)
    tasks = pair_tasks(CORPUS)
    watcher = ccs_start("watch", CORPUS, SERVICE, "--interval", "0.2")
    wait_for(seen(watcher, "0/6 done"), timeout=30, message=lambda: watcher.lines)
    ingest(tasks[:3], CLEAN_LOG, results_dir)
    wait_for(seen(watcher, "3/6 done"), timeout=30, message=lambda: watcher.lines)
    ingest(tasks[3:], CLEAN_LOG, results_dir)
    code, stdout, stderr = watcher.finish()
    assert code == 0, stdout + stderr
    halfway = next(line for line in stderr.splitlines() if "3/6 done" in line)
    found = PROGRESS.search(halfway)
    assert found, halfway
    assert float(found.group(3)) > 0 and found.group(4) != "-", halfway  # a rate and an ETA
    assert f"of {CORPUS}/{SERVICE} closed after" in stdout and "6/6 done (6 no_problem)" in stdout, stdout
    assert "no earlier snapshot" in stdout  # a first run: nothing to compare its failures with

    # No open run: the latest run is told, at once.
    again = ccs("watch", CORPUS, SERVICE, "--fail-on-new-failures")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith(f"no open run of {CORPUS}/{SERVICE}") and "6/6 done" in again.stdout


def test_rerun_wait_exits_3_on_new_failures_when_asked(ccs, ccs_start, corpus_root, results_dir):
    imported(corpus_root, CORPUS, documents=4)
    activated(CORPUS)
    ingest(pair_tasks(CORPUS), CLEAN_LOG, results_dir)  # the first run closes: all without problems
    first = ccs("runs", CORPUS, SERVICE, "--json")
    assert '"open":false' in first.stdout, first.stdout

    rerun = ccs_start("rerun", CORPUS, SERVICE, "--yes", "--wait", "--fail-on-new-failures", "--interval", "0.2")
    wait_for(seen(rerun, "0/4 done"), timeout=30, message=lambda: rerun.lines)
    tasks = pair_tasks(CORPUS)
    ingest(tasks[:2], FATAL_LOG, results_dir)
    ingest(tasks[2:], CLEAN_LOG, results_dir)
    code, stdout, stderr = rerun.finish()
    assert code == 3, stdout + stderr
    assert "closed after" in stdout and "2 fatal" in stdout and "new failures: 2 since" in stdout, stdout

    # The same closed run: `watch` tells it, and fails only when asked to.
    told = ccs("watch", CORPUS, SERVICE)
    assert told.returncode == 0 and "new failures: 2" in told.stdout, told.stdout + told.stderr
    assert ccs("watch", CORPUS, SERVICE, "--fail-on-new-failures").returncode == 3


def test_watch_without_any_run_is_an_error(ccs, corpus_root):
    imported(corpus_root, CORPUS, documents=1)
    result = ccs("watch", CORPUS, SERVICE)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("ccs: ")
