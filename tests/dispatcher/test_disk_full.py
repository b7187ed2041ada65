"""A full results disk loses nothing, with real processes: a dispatcher, a `manage.py worker` running
LaTeXML in its sandbox, and a tmpfs of the test's own as RESULTS_DIR, so the disk is really full. The sink
takes no result while the disk is below RESULTS_MIN_FREE_MB or a write failed for want of space; the
results wait, no work is handed out, the leases hold, health says what to do; once there is room every task
becomes final exactly once, its archive agreeing with its row, and no partial file is ever left."""

from __future__ import annotations

import os
import subprocess
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversion.logparse import parse_log
from corpora.actions.corpora import corpus_import
from corpora.models import Task
from corpora.results import result_path
from jobs.runner import job_run
from services.models import DispatcherState, Worker
from tests.corpora.helpers import activated
from tests.dispatcher.harness import DispatcherProcess, dispatcher_rounds, process_stop, wait_for, worker_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.tcp]

_MB = 1024 * 1024
TEX = "\\documentclass{{article}}\n\\usepackage{{{package}}}\n\\begin{{document}}\nHi $x^2$.\n\\end{{document}}\n"
PLAIN = "\\documentclass{article}\n\\begin{document}\nHello $x^2$.\n\\end{document}\n"
PERL = "package LaTeXML::Package::Pool;\nuse strict;\nuse LaTeXML::Package;\n{body}\n1;\n"
# Says it has started, in a file in its working directory, then waits for the test to put a file named `go`
# beside it (at most 5 minutes): the test decides when each conversion ends.
GATE = (
    'open(my $started, ">", "started") or die; close($started);\n'
    'for (1 .. 3000) { last if -e "go"; select(undef, undef, undef, 0.1); }'
)
# The lease of the first test's tasks: long enough for three conversions to start on a loaded machine
# before the disk fills; the test then waits past it.
LEASE = 45


@pytest.fixture
def results_volume(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs mounted for the test: a results disk that really fills up."""
    path = tmp_path / "results"
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"these tests mount a tmpfs as the results disk and mount refused ({mounted.stderr.strip()}): run them"
            " as root on Linux (in a container: with CAP_SYS_ADMIN)"
        )
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


def _free(volume: Path) -> int:
    stats = os.statvfs(volume)
    return stats.f_bavail * stats.f_frsize


def _fill(volume: Path, leave: int) -> Path:
    """A file that takes the volume's free space but `leave` bytes (a multiple of the page size)."""
    filler = volume / "filler"
    with open(filler, "wb") as stream:
        stream.write(b"\0" * (_free(volume) - leave))
    assert _free(volume) == leave
    return filler


def _files(volume: Path) -> list[str]:
    """Every file on the volume, relative to it."""
    return sorted(
        str((Path(root) / name).relative_to(volume)) for root, _dirs, names in os.walk(volume) for name in names
    )


def _corpus(corpus_root: Path, name: str, documents: dict[str, str], bindings: dict[str, str]) -> list[Task]:
    """A corpus of one directory per document (its doc.tex and the bindings it uses), imported and
    activated for tex_to_html: its tasks."""
    directory = corpus_root / name
    directory.mkdir()
    for document, tex in documents.items():
        (directory / document).mkdir()
        (directory / document / "doc.tex").write_text(tex)
        for file_name, perl in bindings.items():
            (directory / document / file_name).write_text(perl)
    job_run(corpus_import(name=name, path=str(directory), actor="tester", send=False).pk)
    activated(name)
    return list(Task.objects.filter(corpus__name=name, service__name="tex_to_html").order_by("pk"))


def _results_check(authed) -> dict:
    response = authed.get("/api/health")
    assert response.status_code == 200, response.content
    return next(check for check in response.json()["checks"] if check["name"] == "results_dir")


def _held(authed, reason: str) -> dict | None:
    """The results_dir check while it says the sink has stopped taking results for `reason`."""
    check = _results_check(authed)
    held = check["status"] == "problem" and "the sink has stopped taking results" in check["summary"]
    return check if held and reason in check["summary"] else None


def _archives_agree(volume: Path, tasks: list[Task]) -> None:
    """Each task is final after one attempt, with its archive, whose log says the status its row has."""
    for task in Task.objects.filter(pk__in=[task.pk for task in tasks]):
        assert task.status < 0 and task.attempts == 1, (task.pk, task.status, task.attempts)
        archive = result_path(volume, task.corpus_id, task.service_id, task.pk)
        with zipfile.ZipFile(archive) as zipped:
            assert parse_log(zipped.read("cortex.log")).status == task.status, task.pk


def test_a_full_results_disk_holds_every_result_back_and_delivers_each_once_when_space_is_back(
    corpus_root, process_tmpdir, results_volume, authed, settings
):
    """Three conversions are under way when the disk fills; their results wait, the fourth task is not handed
    out and no lease runs out (leases of LEASE seconds, held past their end); once a file is deleted, every
    task becomes final exactly once."""
    settings.RESULTS_DIR, settings.RESULTS_MIN_FREE_MB = results_volume, 8
    gated = {name: TEX.format(package="gate") for name in ("a", "b", "c", "d")}
    tasks = _corpus(corpus_root, "gated", gated, {"gate.sty.ltxml": PERL.format(body=GATE)})
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(results_volume), CORPUS_ROOTS=str(corpus_root), RESULTS_MIN_FREE_MB="8",
        DISPATCHER_LEASE_SECONDS=str(LEASE),
    ).start()  # fmt: skip
    worker = worker_process(dispatcher, scratch=process_tmpdir, concurrency=3, CONVERSION_MEMORY_FLOOR_MB="0")
    markers: set[Path] = set()

    def started() -> set[Path]:
        """The conversions that have started so far (a task's directory goes when its conversion ends)."""
        markers.update(process_tmpdir.glob("cortex-task-*/**/started"))
        return markers

    try:
        first = set(wait_for(lambda: len(started()) == 3 and started(), timeout=240, message="three conversions"))
        filler = _fill(results_volume, leave=4 * _MB)
        check = wait_for(lambda: _held(authed, "results disk full: 4 MB free"), timeout=30, message="the hold")
        assert f"under {results_volume}, below RESULTS_MIN_FREE_MB (8)" in check["summary"]
        assert f"Free space under {results_volume}" in check["remediation"], check
        assert "RESULTS_MIN_FREE_MB" in check["remediation"]
        for marker in first:
            (marker.parent / "go").touch()
        conversions = lambda: sum(Worker.objects.values_list("conversions", flat=True))  # noqa: E731
        wait_for(lambda: conversions() >= 3, timeout=120, message="the three conversions to end")
        # Past the end of the leases as they were handed out, and the reaper's rounds after it.
        leases = Task.objects.filter(pk__in=[task.pk for task in tasks], status__gt=0)
        ends = max(task.leased_until - timedelta(seconds=task.lease_seconds - LEASE) for task in leases)
        wait_for(lambda: timezone.now() > ends + timedelta(seconds=3), timeout=60, message="the leases' end")
        dispatcher_rounds(2)

        held = Task.objects.filter(pk__in=[task.pk for task in tasks])
        assert sorted((task.status > 0, task.attempts) for task in held) == [(True, 1)] * 4
        state = DispatcherState.objects.get()
        assert (state.dispatched, state.ingested, state.reaped) == (3, 0, 0)
        assert _files(results_volume) == ["filler"] and len(started()) == 3
        assert _held(authed, "results disk full") is not None

        filler.unlink()
        fourth = wait_for(lambda: started() - first, timeout=120, message="the fourth task handed out")
        (next(iter(fourth)).parent / "go").touch()
        wait_for(lambda: not held.filter(status__gte=0).exists(), timeout=180, message="every task final")
    finally:
        process_stop(worker)
        dispatcher.stop()
    _archives_agree(results_volume, tasks)
    state = DispatcherState.objects.get()
    assert (state.dispatched, state.ingested, state.discarded, state.reaped) == (4, 4, 0, 0)
    assert _files(results_volume) == sorted(f"{t.corpus_id}/{t.service_id}/{t.pk}.zip" for t in tasks)
    assert _results_check(authed)["status"] != "problem"


def test_a_disk_that_runs_full_in_the_middle_of_an_archive_leaves_no_partial_file_and_loses_no_result(
    corpus_root, process_tmpdir, results_volume, authed, settings
):
    """With no free-space threshold the sink takes the result, and the disk has one page left for its
    archive: the write fails half-way, the file goes, the result waits in the sink until a file is deleted."""
    settings.RESULTS_DIR, settings.RESULTS_MIN_FREE_MB = results_volume, 0
    (task,) = _corpus(corpus_root, "plain", {"doc": PLAIN}, {})
    (results_volume / str(task.corpus_id) / str(task.service_id)).mkdir(parents=True)  # no mkdir can fail instead
    filler = _fill(results_volume, leave=4096)
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(results_volume), CORPUS_ROOTS=str(corpus_root), RESULTS_MIN_FREE_MB="0"
    ).start()
    worker = worker_process(dispatcher, scratch=process_tmpdir, concurrency=1, CONVERSION_MEMORY_FLOOR_MB="0")
    try:
        check = wait_for(lambda: _held(authed, "No space left on device"), timeout=240, message="the failed write")
        assert "writing a result archive failed" in check["summary"] and "Free space under" in check["remediation"]
        dispatcher_rounds(2)
        task.refresh_from_db()
        assert (task.status > 0, task.attempts) == (True, 1)
        assert _files(results_volume) == ["filler"]
        assert DispatcherState.objects.get().ingested == 0 and dispatcher.alive

        filler.unlink()
        wait_for(lambda: Task.objects.filter(pk=task.pk, status__lt=0).exists(), timeout=60, message="the result")
    finally:
        process_stop(worker)
        dispatcher.stop()
    _archives_agree(results_volume, [task])
    archive = result_path(results_volume, task.corpus_id, task.service_id, task.pk)
    assert archive.stat().st_size > 4096  # it could not have fit: the first write stopped half-way
    state = DispatcherState.objects.get()
    assert (state.ingested, state.discarded) == (1, 0)
    assert _files(results_volume) == [f"{task.corpus_id}/{task.service_id}/{task.pk}.zip"]
    assert _results_check(authed)["status"] != "problem"
