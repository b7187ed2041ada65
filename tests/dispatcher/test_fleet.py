"""The fleet through the whole system, with real processes: a dispatcher, `manage.py worker` processes
and real LaTeXML in the sandbox. A worker killed in the middle of a conversion gives its task back within
a minute through its silence; a worker's memory governor stops a conversion that takes the machine below
its floor, and the dispatcher tries the task again."""

from __future__ import annotations

import os
import signal
import time

import pytest

from conversion.machine import memory_available
from corpora.actions.corpora import corpus_import
from corpora.models import LogMessage, Task
from jobs.runner import job_run
from services.models import DispatcherState, Worker
from tests.corpora.helpers import activated
from tests.dispatcher.harness import DispatcherProcess, process_stop, process_tree, wait_for, worker_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

_MB = 1024 * 1024
TEX = "\\documentclass{{article}}\n\\usepackage{{{package}}}\n\\begin{{document}}\nHi $x^2$.\n\\end{{document}}\n"
PERL = "package LaTeXML::Package::Pool;\nuse strict;\nuse LaTeXML::Package;\n{body}\n1;\n"
# Says it has started, in a file in its working directory (the task directory), then sleeps 8 s: long
# enough to be killed in the middle.
SLOW = 'open(my $started, ">", "started") or die; close($started); sleep 8;'
# Takes memory in 50 MB steps, touching every byte, up to 1.2 GB, then waits.
HOG = (
    "my @held;\nfor my $i (1 .. 24) { push @held, 'x' x (50 * 1048576); select(undef, undef, undef, 0.1); }\nsleep 120;"
)


def _corpus(corpus_root, name: str, package: str, body: str) -> Task:
    directory = corpus_root / name
    directory.mkdir()
    document = directory / "doc"
    document.mkdir()
    (document / "doc.tex").write_text(TEX.format(package=package))
    (document / f"{package}.sty.ltxml").write_text(PERL.format(body=body))
    job_run(corpus_import(name=name, path=str(directory), actor="tester", send=False).pk)
    activated(name)
    return Task.objects.get(corpus__name=name, service__name="tex_to_html")


def test_a_worker_killed_mid_conversion_gives_its_task_back_and_another_converts_it_within_90_s(
    corpus_root, tmp_path, process_tmpdir
):
    """With the default lease (900 s) and silence (60 s) settings. The second worker shares the first's
    TMPDIR and removes the task directory the killed one left there."""
    task = _corpus(corpus_root, "slow", "slow", SLOW)
    results = tmp_path / "results"
    dispatcher = DispatcherProcess(RESULTS_DIR=str(results), CORPUS_ROOTS=str(corpus_root)).start()
    first = worker_process(dispatcher, scratch=process_tmpdir, concurrency=1)
    second = None
    try:
        wait_for(lambda: Task.objects.filter(pk=task.pk, status__gt=0).exists(), timeout=60, message="the lease")
        started = "the binding to start; the worker's processes:\n{}"
        wait_for(lambda: list(process_tmpdir.glob("cortex-task-*/**/started")), timeout=60,
                 message=lambda: started.format(process_tree(first.pid)))  # fmt: skip
        os.killpg(first.pid, signal.SIGKILL)  # the worker and its conversion, with no goodbye
        killed = time.monotonic()
        first.wait(10)
        left = [path.name for path in process_tmpdir.iterdir()]
        assert [name.startswith(f"cortex-task-{first.pid}-") for name in left] == [True], left
        second = worker_process(dispatcher, "--identity", "second", scratch=process_tmpdir, concurrency=1)
        wait_for(lambda: not any(name in left for name in os.listdir(process_tmpdir)), timeout=60,
                 message="the killed worker's task directory removed")  # fmt: skip
        done = wait_for(
            lambda: Task.objects.filter(pk=task.pk, status__lt=0).first(), timeout=120, interval=0.5,
            message="the conversion on the second worker",
        )  # fmt: skip
        elapsed = time.monotonic() - killed
    finally:
        if second is not None:
            process_stop(second)
        dispatcher.stop()
    assert elapsed < 90, f"converted {elapsed:.0f} s after the kill"
    assert done.status in (-1, -2) and done.attempts == 2  # the kill's attempt counted, and one more
    assert DispatcherState.objects.get().released == 1
    # Exactly one result: one archive, one set of messages, returned by the second worker alone.
    assert [p.name for p in results.rglob("*.zip")] == [f"{task.pk}.zip"]
    messages = list(LogMessage.objects.filter(task=task).values_list("severity", "category", "what", "details"))
    assert len(messages) == len(set(messages))
    returned = dict(Worker.objects.values_list("identity", "returned"))
    assert returned.get("second") == 1 and sum(returned.values()) == 1


def _worker_kills(identity_prefix: str) -> dict:
    row = Worker.objects.filter(identity__startswith=identity_prefix).first()
    return row.kills if row is not None else {}


def test_the_governor_stops_a_conversion_below_its_floor_and_the_task_is_tried_again(
    corpus_root, tmp_path, process_tmpdir
):
    """The worker's floor is set 400 MB below what the machine has now; the document takes up to 1.2 GB.
    Each attempt is stopped by the governor and sent back; the last one ends fatal with its message."""
    task = _corpus(corpus_root, "hog", "hog", HOG)
    floor_mb = (memory_available() - 400 * _MB) // _MB
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root), DISPATCHER_MAX_ATTEMPTS="2"
    ).start()
    worker = worker_process(
        dispatcher, "--identity", "governed", scratch=process_tmpdir, concurrency=1,
        CONVERSION_MEMORY_FLOOR_MB=str(floor_mb),
    )  # fmt: skip
    try:
        done = wait_for(
            lambda: Task.objects.filter(pk=task.pk, status__lt=0).first(), timeout=180, interval=0.5,
            message="the attempts to run out",
        )  # fmt: skip
        kills = wait_for(lambda: _worker_kills("governed").get("governor") == 2 and _worker_kills("governed"),
                         timeout=30, message="the heartbeat with both stops")  # fmt: skip
    finally:
        process_stop(worker)
        dispatcher.stop()
    assert (done.status, done.attempts) == (-4, 2)
    assert DispatcherState.objects.get().retried == 1  # the first stop went back for another attempt
    fatal = LogMessage.objects.get(task=task, severity="fatal")
    assert (fatal.category, fatal.what) == ("infrastructure", "governor")
    assert fatal.details.startswith("the worker's memory governor stopped the conversion: the machine had")
    assert f"below the floor of {floor_mb} MB" in fatal.details
    assert kills == {"governor": 2}
    # Measured four times a second while it grew by 500 MB/s: more than LaTeXML alone holds.
    assert Worker.objects.get(identity="governed").peak_rss > 150 * _MB
