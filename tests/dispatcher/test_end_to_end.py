"""Real LaTeXML through the whole system: dispatcher and `manage.py worker` processes over real
sockets; what lands in the database equals what latexmlc itself reports for the same documents, with the
worker's output checks (conversion.output_checks) on top, and the run's telemetry counts every conversion
in each stage."""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import psutil
import pytest

from conversion.choices import TaskStatus
from conversion.logparse import parse_log
from corpora.models import LogMessage, Run, Task, TaskRuntime, TelemetryMinute
from services.models import Service, Worker
from tests.corpora.helpers import activated
from tests.dispatcher.harness import (
    DispatcherProcess,
    dispatcher_rounds,
    process_stop,
    process_tree,
    wait_for,
    worker_process,
)
from tests.support import installed_latexmlc_version

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.tcp]

DOCUMENTS = {
    "clean.tex": "\\documentclass{article}\n\\begin{document}\nHello $x^2$.\n\\end{document}\n",
    "warning.tex": "\\documentclass{article}\n\\begin{document}\nSee \\ref{sec:missing}.\n\\end{document}\n",
    "error.tex": "\\documentclass{article}\n\\begin{document}\nAn \\undefinedmacro{} here.\n\\end{document}\n",
    "fatal.tex": "\\documentclass{article}\n\\begin{document}\n"
    + " ".join(f"\\undef{chr(97 + i // 26)}{chr(97 + i % 26)}{{}}" for i in range(110))
    + "\n\\end{document}\n",
    # LaTeXML converts this without a complaint to an empty page: the output checks make it an error.
    "empty.tex": "\\documentclass{article}\n\\begin{document}\n\\iffalse\n"
    + "A body that a conditional never true hides from the reader. " * 10
    + "\n\\fi\n\\end{document}\n",
}


def _latexmlc(path: Path) -> tuple[int, set[tuple[str, str, str]]]:
    """Run latexmlc directly on a copy and read its own verdict."""
    work = path.parent / f"direct-{path.stem}"
    work.mkdir()
    shutil.copy(path, work / path.name)
    subprocess.run(
        ["latexmlc", "--format=html5", "--dest=out.html", "--log=cortex.log", path.name],
        cwd=work, capture_output=True, timeout=180, check=False,
    )  # fmt: skip
    parsed = parse_log((work / "cortex.log").read_bytes())
    return parsed.status, {(m.severity, m.category, m.what) for m in parsed.messages if m.severity != "info"}


@pytest.fixture
def latexml_corpus(corpus_root, tmp_path):
    if not shutil.which("latexmlc"):
        pytest.fail("latexmlc is not installed: apt-get install latexml")
    directory = corpus_root / "real"
    directory.mkdir()
    for name, text in DOCUMENTS.items():
        (directory / name).write_text(text)
    from corpora.actions.corpora import corpus_import
    from jobs.runner import job_run

    job_run(corpus_import(name="real", path=str(directory), actor="tester", send=False).pk)
    activated("real")
    return directory


def test_statuses_and_messages_equal_what_latexmlc_reports(latexml_corpus, tmp_path, corpus_root, process_tmpdir):
    expected = {name.removesuffix(".tex"): _latexmlc(latexml_corpus / name) for name in DOCUMENTS}
    assert [expected[n][0] for n in ("clean", "warning", "error", "fatal", "empty")] == [-1, -2, -3, -4, -1]
    # The one document whose output the checks find wanting: an empty body is an error, never no_problem.
    expected["empty"] = (TaskStatus.ERROR, expected["empty"][1] | {("error", "output_empty", "body")})
    dispatcher = DispatcherProcess(RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root)).start()
    worker = worker_process(dispatcher, scratch=process_tmpdir)
    try:
        tasks = Task.objects.filter(corpus__name="real", service__name="tex_to_html")
        wait_for(lambda: not tasks.filter(status__gte=0).exists(), timeout=240, interval=0.5, message="conversions")
    finally:
        process_stop(worker)
        dispatcher.stop()
    for task in tasks.select_related("document"):
        status, messages = expected[task.document.name]
        stored = set(
            LogMessage.objects.filter(task=task).exclude(severity="info").values_list("severity", "category", "what")
        )
        assert (task.status, stored) == (status, messages), task.document.name
        assert TaskRuntime.objects.get(task=task).runtime_ms > 0
        assert (tmp_path / "results" / str(task.corpus_id) / str(task.service_id) / f"{task.pk}.zip").exists()
    identities = Worker.objects.filter(service__name="tex_to_html")
    assert sum(w.returned for w in identities) == len(DOCUMENTS) and all(w.in_flight == 0 for w in identities)


def _nearest_rank(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def test_the_telemetry_of_real_conversions_counts_every_task_in_each_stage(
    latexml_corpus, tmp_path, corpus_root, process_tmpdir, api
):
    tasks = Task.objects.filter(corpus__name="real", service__name="tex_to_html")
    run = Run.objects.get(corpus__name="real", service__name="tex_to_html", finished_at__isnull=True)
    started = time.monotonic()
    dispatcher = DispatcherProcess(RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root)).start()
    worker = worker_process(dispatcher, scratch=process_tmpdir)
    try:
        # The last result closes the drained run in its batch, after the telemetry was counted into it.
        wait_for(
            lambda: Run.objects.filter(pk=run.pk, finished_at__isnull=False).exists(), timeout=240, interval=0.5,
            message="the run to close",
        )  # fmt: skip
    finally:
        process_stop(worker)
        dispatcher.stop()
    wall_ms = (time.monotonic() - started) * 1000
    assert not tasks.filter(status__gte=0).exists() and tasks.filter(attempts=1).count() == len(DOCUMENTS)
    body = api.get("/api/runs/real/tex_to_html/telemetry").json()
    assert body["open_run"] is None and body["last_closed_run"]["id"] == run.pk
    stages = {stage["stage"]: stage for stage in body["last_closed_run"]["stages"]}
    assert {name: stage["count"] for name, stage in stages.items()} == dict.fromkeys(
        ("queue_wait", "conversion", "ingestion", "end_to_end"), len(DOCUMENTS)
    )
    assert sum(TelemetryMinute.objects.filter(run_id=run.pk).values_list("count", flat=True)) == len(DOCUMENTS)
    # A conversion stage (lease to arrival) holds the worker's own latexmlc runtime and fits in the test's
    # wall time: each percentile's bin lies between the runtimes' percentile and that wall time.
    runtimes = list(TaskRuntime.objects.filter(task__in=tasks).values_list("runtime_ms", flat=True))
    assert len(runtimes) == len(DOCUMENTS)
    conversion = stages["conversion"]
    for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert conversion[name]["to_ms"] > _nearest_rank(runtimes, fraction), name
        assert conversion[name]["from_ms"] <= wall_ms, name
    assert sum(row["count"] for row in conversion["histogram"]) == len(DOCUMENTS)
    assert stages["end_to_end"]["p99"]["to_ms"] >= conversion["p99"]["from_ms"]


def test_a_worker_killed_mid_task_leaves_the_task_to_be_leased_again_and_completed(
    latexml_corpus, tmp_path, corpus_root, process_tmpdir
):
    # A short first lease, so that the killed worker's lease runs out soon; the retry then gets a lease
    # longer than any conversion of this document on a loaded machine (tens of seconds), so that a slow
    # conversion is not itself taken for a lost worker. Spare attempts, too: this tests the retry, not
    # the limit on attempts.
    Service.objects.filter(name="tex_to_html").update(lease_seconds=4)
    Task.objects.filter(corpus__name="real", service__name="tex_to_html").exclude(document__name="clean").delete()
    task = Task.objects.get(corpus__name="real", service__name="tex_to_html")
    slow = "\\documentclass{article}\n\\begin{document}\n" + ("Text $x_{i}^{2}$. " * 3000) + "\n\\end{document}\n"
    (latexml_corpus / "clean.tex").write_text(slow)  # long enough to be killed in the middle
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root), DISPATCHER_MAX_ATTEMPTS="10"
    ).start()
    first = worker_process(dispatcher, scratch=process_tmpdir, concurrency=1)
    try:
        wait_for(lambda: Task.objects.filter(pk=task.pk, status__gt=0).exists(), timeout=60, message="the lease")
        Service.objects.filter(name="tex_to_html").update(lease_seconds=900)  # for the leases from now on
        converting = "latexmlc to be converting; the worker's processes:\n{}"
        wait_for(lambda: _latexmlc_converting(first.pid), timeout=60,
                 message=lambda: converting.format(process_tree(first.pid)))  # fmt: skip
        os.killpg(first.pid, signal.SIGKILL)  # the worker and its conversion, with no goodbye
        first.wait(10)
        dispatcher_rounds(2)  # it has reread the services since the update: the next lease is the long one
        second = worker_process(dispatcher, scratch=process_tmpdir, concurrency=1)
        try:
            done = wait_for(
                lambda: Task.objects.filter(pk=task.pk, status__lt=0).first(), timeout=600, interval=0.5,
                message="the retried conversion",
            )  # fmt: skip
        finally:
            process_stop(second)
    finally:
        dispatcher.stop()
    assert done.status in (-1, -2)
    assert (done.attempts, done.lease_seconds) == (2, 900)  # leased once more after the kill, and no more


def _latexmlc_converting(root_pid: int) -> bool:
    """A latexmlc under the worker has used some CPU: it is in the middle of the conversion."""
    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for child in children:
        try:
            if "latexml" in " ".join(child.cmdline()) and sum(child.cpu_times()[:2]) >= 0.5:
                return True
        except psutil.Error:
            continue
    return False


def test_a_worker_keeps_the_result_limit_so_an_oversized_result_is_invalid_with_its_log(
    latexml_corpus, tmp_path, corpus_root, process_tmpdir
):
    """`manage.py worker` takes RESULT_MAX_BYTES as the dispatcher does: it sends the log of a conversion
    whose files would pass it, with a message naming the limit, rather than the files."""
    limit = "3000"  # every document's HTML, CSS and log take more, deflated
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root), RESULT_MAX_BYTES=limit
    ).start()
    worker = worker_process(dispatcher, scratch=process_tmpdir, RESULT_MAX_BYTES=limit)
    try:
        tasks = Task.objects.filter(corpus__name="real", service__name="tex_to_html")
        wait_for(lambda: not tasks.filter(status__gte=0).exists(), timeout=240, interval=0.5, message="conversions")
    finally:
        process_stop(worker)
        dispatcher.stop()
    assert set(tasks.values_list("status", flat=True)) == {TaskStatus.INVALID}
    for task in tasks:
        details = LogMessage.objects.get(task=task, category="invalid", what="too_large").details
        assert details.startswith(f"the result archive passes the limit of {limit} bytes"), details


TINY = "\\documentclass{article}\n\\begin{document}\nA tiny paper, $x^2$.\n\\end{document}\n"


def _html(results: Path, task: Task) -> str:
    with zipfile.ZipFile(results / str(task.corpus_id) / str(task.service_id) / f"{task.pk}.zip") as archive:
        return archive.read("tiny.html").decode()


def test_one_worker_converts_for_two_services_each_task_with_its_services_profile_and_follows_a_change(
    corpus_root, tmp_path, process_tmpdir
):
    """One `manage.py worker` process serves `plain` (the default profile) and `bare` (no default resources):
    each result has the profile its task came with; a profile changed meanwhile reaches the next task
    handed out with nothing restarted; a CorTeX request still gets CorTeX's reply; the worker rows and the
    runs say which engine and version converted, and under which profile."""
    from conversion.profiles import DEFAULT, Profile
    from corpora.actions.corpora import corpus_import
    from corpora.actions.reports import rerun
    from jobs.runner import job_run
    from services.actions import service_profile_set, service_register
    from tests.dispatcher.harness import FakeWorker

    (corpus_root / "tiny").mkdir()
    (corpus_root / "tiny" / "tiny.tex").write_text(TINY)
    job_run(corpus_import(name="tiny", path=str(corpus_root / "tiny"), actor="tester", send=False).pk)
    bare_profile = Profile(nodefaultresources=True)
    service_register(name="plain", actor="tester")
    service_register(name="bare", actor="tester", profile=bare_profile.as_json())
    activated("tiny", "plain")
    activated("tiny", "bare")
    tasks = Task.objects.filter(corpus__name="tiny", service__name__in=["plain", "bare"])
    results = tmp_path / "results"
    dispatcher = DispatcherProcess(RESULTS_DIR=str(results), CORPUS_ROOTS=str(corpus_root)).start()
    worker = worker_process(dispatcher, "--service", "bare", service="plain", scratch=process_tmpdir, concurrency=1)
    try:
        wait_for(lambda: tasks.filter(status__lt=0).count() == 2, timeout=240, interval=0.5, message="both tasks")
        plain, bare = tasks.get(service__name="plain"), tasks.get(service__name="bare")
        assert plain.status == bare.status == -1
        assert '<link rel="stylesheet" href="LaTeXML.css"' in _html(results, plain)
        assert "LaTeXML.css" not in _html(results, bare) and "A tiny paper" in _html(results, bare)
        reported = Worker.objects.filter(service__name__in=["plain", "bare"], engine_version__isnull=False)
        rows = wait_for(
            lambda: (found := list(reported)) and len(found) == 2 and found,
            message="the worker rows of both services with the engine's version",
        )
        version = installed_latexmlc_version()
        assert {(row.service.name, row.engine, row.engine_version) for row in rows} == {
            ("plain", "latexmlc", version), ("bare", "latexmlc", version),
        }  # fmt: skip
        assert len({row.identity for row in rows}) == 1  # one worker process, one thread
        first_bare = Run.objects.get(corpus__name="tiny", service__name="bare")
        assert (first_bare.profile, first_bare.profile_hash) == (bare_profile.as_json(), bare_profile.digest)
        assert first_bare.engine_versions == [version]

        # The change: bare takes the default profile; its next task is converted under it, by the same worker.
        service_profile_set(name="bare", actor="tester", preset="default")
        dispatcher_rounds(2)
        rerun(corpus_name="tiny", service_name="bare", actor="tester", description="default profile")
        wait_for(lambda: tasks.filter(service__name="bare", status__lt=0).exists(), timeout=240, interval=0.5,
                 message="the rerun")  # fmt: skip
        assert '<link rel="stylesheet" href="LaTeXML.css"' in _html(results, tasks.get(service__name="bare"))
        assert worker.poll() is None and dispatcher.alive  # nothing restarted
        second_bare = Run.objects.filter(corpus__name="tiny", service__name="bare").order_by("-started_at").first()
        assert (second_bare.profile_hash, second_bare.profile_hashes) == (DEFAULT.digest, [DEFAULT.digest])

        cortex = FakeWorker(dispatcher, identity="cortex:1")
        assert cortex.raw_request([b"plain"]) == [b"0", b""]  # a CorTeX request: CorTeX's plain no-work reply
        cortex.close()
    finally:
        process_stop(worker)
        dispatcher.stop()


def test_a_worker_serving_all_services_takes_up_a_service_registered_after_it_started(
    corpus_root, tmp_path, process_tmpdir
):
    """`manage.py worker --all-services` (what `make run` starts) reads the services again while it runs: a
    service registered and activated after it started is converted, with nothing restarted."""
    from corpora.actions.corpora import corpus_import
    from jobs.runner import job_run
    from services.actions import service_register

    (corpus_root / "tiny").mkdir()
    (corpus_root / "tiny" / "tiny.tex").write_text(TINY)
    job_run(corpus_import(name="tiny", path=str(corpus_root / "tiny"), actor="tester", send=False).pk)
    activated("tiny")  # tex_to_html, registered before the worker starts
    tasks = Task.objects.filter(corpus__name="tiny")
    dispatcher = DispatcherProcess(RESULTS_DIR=str(tmp_path / "results"), CORPUS_ROOTS=str(corpus_root)).start()
    worker = worker_process(dispatcher, "--all-services", service=None, scratch=process_tmpdir, concurrency=1)
    try:
        wait_for(lambda: tasks.filter(service__name="tex_to_html", status__lt=0).exists(), timeout=240,
                 interval=0.5, message="the service registered before it started")  # fmt: skip
        service_register(name="later", actor="tester", profile="arxiv")
        activated("tiny", "later")
        wait_for(lambda: tasks.filter(service__name="later", status__lt=0).exists(), timeout=240, interval=0.5,
                 message="the service registered after it started")  # fmt: skip
        assert tasks.get(service__name="later").status == -1 and worker.poll() is None
    finally:
        process_stop(worker)
        dispatcher.stop()
