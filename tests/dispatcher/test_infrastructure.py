"""Infrastructure failures are not converter failures: a conversion the machine ends (its worker killed
mid-conversion, here with a real SIGKILL of real worker processes) is tried again on another worker, and
ends with its real status there; when no attempt can finish it ends `Fatal:infrastructure:<reason>`, never
as a converter fatal. The ventilator hands a task the machine ended on one worker to another that asks."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from corpora.actions.corpora import corpus_import
from corpora.models import LogMessage, Task
from corpora.queries.corpora import pair_resolve
from corpora.queries.reports import service_overview
from jobs.runner import job_run
from services.models import Worker
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import DispatcherProcess, FakeWorker, process_stop, process_tree, wait_for, worker_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TEX = "\\documentclass{{article}}\n\\usepackage{{{package}}}\n\\begin{{document}}\nHi $x^2$.\n\\end{{document}}\n"
PLAIN = "\\documentclass{article}\n\\begin{document}\nPlain $y$.\n\\end{document}\n"
PERL = "package LaTeXML::Package::Pool;\nuse strict;\nuse LaTeXML::Package;\n{body}\n1;\n"
# Says it has started, in a file in its working directory (the task directory), then sleeps: long enough
# to be killed in the middle.
SLOW = 'open(my $started, ">", "started") or die; close($started); sleep 8;'
# Twice a heartbeat (conversion.worker.HEARTBEAT_SECONDS): a killed worker's task comes back within it.
SILENCE = "20"


def _corpus(corpus_root: Path, name: str, plain: int) -> Task:
    """A corpus of one slow document and `plain` quick ones, activated; returns the slow one's task."""
    directory = corpus_root / name
    directory.mkdir()
    slow = directory / "slow"
    slow.mkdir()
    (slow / "slow.tex").write_text(TEX.format(package="slow"))
    (slow / "slow.sty.ltxml").write_text(PERL.format(body=SLOW))
    for index in range(plain):
        (directory / f"plain{index}.tex").write_text(PLAIN)
    job_run(corpus_import(name=name, path=str(directory), actor="tester", send=False).pk)
    activated(name)
    return Task.objects.get(corpus__name=name, service__name="tex_to_html", document__name="slow")


def _converting(scratches: dict[str, Path]) -> str | None:
    """The worker whose scratch directory holds the slow binding's `started` file."""
    for name, scratch in scratches.items():
        if list(scratch.glob("cortex-task-*/**/started")):
            return name
    return None


def _kill_the_converting_worker(scratches: dict[str, Path], processes: dict[str, subprocess.Popen]) -> str:
    """Wait until one worker converts the slow document, then SIGKILL it with its conversion: no goodbye."""
    trees = "; ".join(f"{name}: {process_tree(process.pid)}" for name, process in processes.items())
    killed = wait_for(lambda: _converting(scratches), timeout=90,
                      message=lambda: f"the slow binding to start; the workers' processes: {trees}")  # fmt: skip
    os.killpg(processes[killed].pid, signal.SIGKILL)
    processes[killed].wait(10)
    return killed


def _converter_fatals(tasks) -> list[tuple[int, str, str]]:
    """Fatal messages of the tasks that are not infrastructure failures."""
    fatal = LogMessage.objects.filter(task__in=tasks, severity="fatal").exclude(category="infrastructure")
    return list(fatal.values_list("task_id", "category", "what"))


def test_a_worker_killed_mid_conversion_has_its_task_converted_by_the_survivor_with_its_real_status(
    corpus_root, tmp_path, process_tmpdir
):
    task = _corpus(corpus_root, "killed", plain=3)
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root),
        DISPATCHER_WORKER_SILENCE_SECONDS=SILENCE, DISPATCHER_MAX_ATTEMPTS="3",
    ).start()  # fmt: skip
    scratches = {name: process_tmpdir / name for name in ("first", "second")}
    processes = {
        name: worker_process(dispatcher, "--identity", name, scratch=scratches[name], concurrency=1)
        for name in scratches
    }
    try:
        killed = _kill_the_converting_worker(scratches, processes)
        survivor = next(name for name in processes if name != killed)
        tasks = Task.objects.filter(corpus__name="killed", service__name="tex_to_html")
        wait_for(lambda: not tasks.filter(status__gte=0).exists(), timeout=180, interval=0.5,
                 message="every task completed")  # fmt: skip
    finally:
        for process in processes.values():
            process_stop(process)
        dispatcher.stop()
    task.refresh_from_db()
    # The killed attempt counted, the survivor's finished it with the document's own status.
    assert task.status in (-1, -2) and task.attempts == 2, (task.status, task.attempts)
    assert task.last_worker == killed
    assert not _converter_fatals(tasks)
    assert set(tasks.values_list("status", flat=True)) <= {-1, -2}
    returned = dict(Worker.objects.filter(returned__gt=0).values_list("identity", "returned"))
    assert returned.get(survivor, 0) >= 1 and sum(returned.values()) == tasks.count()
    assert service_overview(pair_resolve("killed", "tex_to_html")).infrastructure_fatal == 0


def test_a_conversion_no_attempt_can_finish_ends_as_an_infrastructure_failure_not_a_converter_fatal(
    corpus_root, tmp_path, process_tmpdir
):
    """One attempt, and its worker killed mid-conversion: the task is fatal with the infrastructure class,
    which the report counts apart from the converter's fatals."""
    task = _corpus(corpus_root, "lost", plain=0)
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root),
        DISPATCHER_WORKER_SILENCE_SECONDS=SILENCE, DISPATCHER_MAX_ATTEMPTS="1",
    ).start()  # fmt: skip
    scratches = {"only": process_tmpdir / "only"}
    processes = {"only": worker_process(dispatcher, "--identity", "only", scratch=scratches["only"], concurrency=1)}
    try:
        _kill_the_converting_worker(scratches, processes)
        done = wait_for(lambda: Task.objects.filter(pk=task.pk, status__lt=0).first(), timeout=120, interval=0.5,
                        message="the silent worker's lease reaped")  # fmt: skip
    finally:
        dispatcher.stop()
    assert (done.status, done.attempts, done.last_worker) == (-4, 1, "only")
    fatal = LogMessage.objects.get(task=task, severity="fatal")
    assert (fatal.category, fatal.what) == ("infrastructure", "worker_died")
    assert fatal.details == "no result came back after 1 attempt; its last worker (only) fell silent"
    assert not _converter_fatals([task])
    overview = service_overview(pair_resolve("lost", "tex_to_html"))
    assert (overview.counts["fatal"], overview.infrastructure_fatal) == (1, 1)


@pytest.fixture
def pinned(corpus_root):
    """Three TODO tasks; the first one the machine last ended on the worker `fake:a`."""
    imported(corpus_root, "pinned", documents=3)
    activated("pinned")
    tasks = list(Task.objects.filter(corpus__name="pinned", service__name="tex_to_html").order_by("pk"))
    Task.objects.filter(pk=tasks[0].pk).update(last_worker="fake:a")
    return [str(task.pk) for task in tasks]


def test_a_task_the_machine_ended_on_one_worker_goes_to_another_that_asks(pinned, dispatcher):
    process = dispatcher()
    first, second = FakeWorker(process, identity="fake:a"), FakeWorker(process, identity="fake:b")
    try:
        given_a = wait_for(lambda: first.ask("tex_to_html"), timeout=30, message="a task for a")[0]
        given_b = wait_for(lambda: second.ask("tex_to_html"), timeout=30, message="a task for b")[0]
    finally:
        first.close()
        second.close()
    assert (given_a, given_b) == (pinned[1], pinned[0])


def test_a_lone_worker_still_gets_the_task_the_machine_ended_on_it(pinned, dispatcher):
    process = dispatcher()
    worker = FakeWorker(process, identity="fake:a")
    try:
        given = [wait_for(lambda: worker.ask("tex_to_html"), timeout=30, message="a task")[0] for _ in range(3)]
    finally:
        worker.close()
    assert sorted(given) == sorted(pinned) and given[0] == pinned[1]
