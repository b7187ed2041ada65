"""The dispatcher over real ZeroMQ sockets, as a real process against the test database."""

from __future__ import annotations

import io
import os
import signal
import time
import zipfile

import pytest
from django.utils import timezone

from corpora.models import LogMessage, Run, Task, TaskRuntime
from services.models import DispatcherState, Service, Worker
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import (
    CLEAN_LOG,
    WARNING_LOG,
    FakeWorker,
    dispatcher_rounds,
    result_zip,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def pair(corpus_root):
    imported(corpus_root, "demo", documents=3)
    activated("demo")
    return Task.objects.filter(corpus__name="demo", service__name="tex_to_html")


def _state() -> DispatcherState:
    return wait_for(lambda: DispatcherState.objects.first(), message="the dispatcher to start")


def test_a_task_goes_out_as_a_zip_and_its_result_comes_back_as_status_messages_and_runtime(pair, dispatcher, tmp_path):
    process = dispatcher()
    worker = FakeWorker(process, message_size=100_000)
    _state()
    task_id, payload = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        assert archive.namelist() == [f"{Task.objects.get(pk=task_id).document.name}.tex"]
        assert b"\\documentclass" in archive.read(archive.namelist()[0])
    leased = Task.objects.get(pk=task_id)
    assert leased.status > 0 and leased.attempts == 1 and leased.leased_until > timezone.now()
    worker.give("tex_to_html", task_id, result_zip(WARNING_LOG, {"doc.html": b"<html></html>"}))
    done = wait_for(lambda: Task.objects.filter(pk=task_id, status__lt=0).first(), message="the result")
    assert done.status == -3 and done.leased_until is None
    messages = set(LogMessage.objects.filter(task_id=task_id).values_list("severity", "category", "what"))
    assert messages == {
        ("info", "loaded_file", "/usr/share/perl5/LaTeXML/Package/article.cls.ltxml"),
        ("warning", "expected", "label"),
        ("error", "undefined", "\\foo"),
    }
    assert TaskRuntime.objects.get(task_id=task_id).runtime_ms == 42
    stored = tmp_path / "results" / str(done.corpus_id) / str(done.service_id) / f"{task_id}.zip"
    assert zipfile.ZipFile(stored).read("doc.html") == b"<html></html>"
    tally = wait_for(lambda: Worker.objects.filter(identity="fake:1", returned=1).first(), message="the tally")
    assert (tally.dispatched, tally.in_flight, tally.service.name) == (1, 0, "tex_to_html")
    worker.close()
    assert process.stop() == 0


def test_payloads_end_with_a_short_frame_even_at_an_exact_multiple(pair, dispatcher, corpus_root):
    process = dispatcher(DISPATCHER_MESSAGE_SIZE="1024")
    worker = FakeWorker(process, message_size=1024)
    _state()
    for _ in range(3):
        task = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
        assert zipfile.ZipFile(io.BytesIO(task[1])).testzip() is None
    worker.close()


def test_no_work_unknown_services_and_garbage_get_the_no_work_reply(pair, dispatcher):
    process = dispatcher()
    worker = FakeWorker(process)
    _state()
    assert worker.raw_request([b"no_such_service"]) == [b"0", b""]
    assert worker.raw_request([b"a", b"b", b"c"]) == [b"0", b""]
    assert worker.raw_request([b"\xff\xfe"]) == [b"0", b""]
    assert worker.raw_request([b"import"]) == [b"0", b""]  # import tasks are done, never TODO
    worker.raw_give([b"only-one-frame"])
    worker.raw_give([b"\xff", b"\xfe", b"\xfd", b"data"])
    for _ in range(3):
        assert wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    assert worker.ask("tex_to_html") is None  # all three are out
    state = wait_for(lambda: DispatcherState.objects.filter(garbage__gte=4).first(), message="garbage counted")
    assert state.garbage == 4 and process.alive
    worker.close()


def test_results_for_tasks_not_leased_or_for_another_service_are_discarded_and_counted(pair, dispatcher):
    process = dispatcher()
    worker = FakeWorker(process)
    _state()
    todo = pair.first()
    worker.give("tex_to_html", str(todo.pk), result_zip(CLEAN_LOG))  # never leased
    wait_for(lambda: DispatcherState.objects.filter(discarded__gte=1).first(), message="the first discard")
    assert Task.objects.get(pk=todo.pk).status == 0
    task_id, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    Service.objects.create(name="other")
    worker.give("other", task_id, result_zip(CLEAN_LOG))  # wrong service for this task
    worker.give("tex_to_html", "not-a-number", result_zip(CLEAN_LOG))
    wait_for(lambda: DispatcherState.objects.filter(discarded__gte=3).first(), message="discards counted")
    assert Task.objects.get(pk=task_id).status > 0
    worker.give("tex_to_html", task_id, result_zip(CLEAN_LOG))
    wait_for(lambda: Task.objects.filter(pk=task_id, status=-1).exists(), message="the right result applied")
    worker.close()


def test_odd_results_are_fatal_with_a_reason_and_unreadable_ones_retried(pair, dispatcher):
    process = dispatcher()
    worker = FakeWorker(process)
    _state()
    first, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    second, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    third, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    worker.give("tex_to_html", first, result_zip("", {"a.html": b"x"}, with_log=False))
    worker.give("tex_to_html", second, result_zip(b"Warning:latex:\xff\xfe bad bytes\nStatus:conversion:1\n"))
    worker.give("tex_to_html", third, b"PK\x03\x04 truncated zip")
    wait_for(lambda: Task.objects.filter(pk__in=[first, second], status__lt=0).count() == 2, message="results")
    assert Task.objects.get(pk=first).status == -4
    assert LogMessage.objects.get(task_id=first).what == "missing_log"
    assert Task.objects.get(pk=second).status == -2
    assert "\ufffd" in LogMessage.objects.get(task_id=second).what + LogMessage.objects.get(task_id=second).details
    wait_for(lambda: DispatcherState.objects.filter(discarded__gte=1).first(), message="the unreadable result")
    assert Task.objects.get(pk=third).status > 0  # still leased: it will be retried when the lease runs out
    worker.close()


def test_expired_leases_are_retried_then_fatal_after_the_attempts(pair, dispatcher):
    Service.objects.filter(name="tex_to_html").update(lease_seconds=1)
    process = dispatcher(DISPATCHER_MAX_ATTEMPTS="2")
    worker = FakeWorker(process)
    _state()
    seen: list[str] = []
    for _ in range(6):  # 3 tasks x 2 attempts, never answered
        seen.append(wait_for(lambda: worker.ask("tex_to_html"), timeout=30, message="a (re)leased task")[0])
    assert sorted(seen) == sorted([str(t.pk) for t in pair] * 2)
    wait_for(lambda: pair.filter(status=-4).count() == 3, timeout=30, message="all fatal")
    whats = set(LogMessage.objects.filter(task__in=pair).values_list("category", "what"))
    assert whats == {("infrastructure", "lease_lost")}  # never a converter fatal
    assert set(LogMessage.objects.filter(task__in=pair).values_list("task_status", flat=True)) == {-4}
    run = Run.objects.get(corpus__name="demo", service__name="tex_to_html")  # drained by the reaper: closed
    assert run.finished_at is not None and run.tallies["fatal"] == 3 and run.snapshot_id is not None
    assert worker.ask("tex_to_html", timeout=2) is None
    worker.close()


def test_the_lease_length_is_captured_when_leased(pair, dispatcher):
    Service.objects.filter(name="tex_to_html").update(lease_seconds=600)
    process = dispatcher()
    worker = FakeWorker(process)
    _state()
    first, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    Service.objects.filter(name="tex_to_html").update(lease_seconds=30)
    dispatcher_rounds(2)  # the dispatcher has reread the services
    Task.objects.filter(pk__in=[t.pk for t in pair if str(t.pk) != first]).update(status=0)  # drop its queue
    dispatcher_rounds(2)  # and has dropped its queued tasks that are no longer leased
    second, _ = wait_for(lambda: worker.ask("tex_to_html"), message="another task")
    assert Task.objects.get(pk=first).lease_seconds == 600
    assert Task.objects.get(pk=second).lease_seconds == 30
    worker.close()


def test_backpressure_stops_handing_out_at_max_in_flight(pair, dispatcher):
    process = dispatcher(DISPATCHER_MAX_IN_FLIGHT="2")
    worker = FakeWorker(process)
    _state()
    first, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    assert wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    assert worker.ask("tex_to_html") is None  # two in flight: the fleet waits
    worker.give("tex_to_html", first, result_zip(CLEAN_LOG))
    assert wait_for(lambda: worker.ask("tex_to_html"), message="room again")
    worker.close()


def test_paused_tasks_are_not_handed_out_and_resume_brings_them_back(pair, dispatcher, authed):
    process = dispatcher()
    worker = FakeWorker(process)
    _state()
    out, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    body = authed.post("/api/reports/demo/tex_to_html/pause").json()
    assert body == {"corpus": "demo", "service": "tex_to_html", "action": "pause", "blocked": 3}
    dispatcher_rounds(2)  # the dispatcher has dropped its queued tasks that are no longer leased
    assert worker.ask("tex_to_html") is None
    worker.give("tex_to_html", out, result_zip(CLEAN_LOG))
    wait_for(lambda: DispatcherState.objects.filter(discarded__gte=1).first(), message="the late result discarded")
    assert set(pair.values_list("status", flat=True)) == {-6}
    assert authed.post("/api/conversions/resume").json()["resumed"] == 3
    assert wait_for(lambda: worker.ask("tex_to_html"), message="work again")
    worker.close()


def test_a_dead_sink_stops_the_dispatcher_with_an_error(pair, dispatcher, capfd):
    process = dispatcher()
    _state()
    os.kill(process.sink_pid(), signal.SIGKILL)
    assert process.process.wait(20) != 0  # the supervisor (or compose) restarts it
    assert not process.alive
    assert "the sink process died (exit code -9)" in capfd.readouterr().err


def test_a_sink_stopped_from_outside_says_so_and_stops_the_dispatcher(pair, dispatcher, capfd):
    process = dispatcher()
    _state()
    os.kill(process.sink_pid(), signal.SIGTERM)
    assert process.process.wait(20) != 0
    assert "the sink process died (exit code 0; it was sent SIGTERM)" in capfd.readouterr().err


def test_a_sink_that_ends_once_the_ventilator_is_told_to_stop_is_a_clean_stop(pair, dispatcher, capfd):
    """A SIGTERM to the process group reaches both processes; the sink may end first. Made certain here:
    the ventilator is frozen while the sink ends, and its own SIGTERM waits for it when it thaws, with
    its once-a-second check of the sink due."""
    process = dispatcher()
    _state()
    sink = process.sink_pid()
    os.kill(process.process.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        os.kill(sink, signal.SIGTERM)

        def sink_ended_and_check_due() -> bool:
            with open(f"/proc/{sink}/stat") as stat:  # a zombie until the frozen ventilator reaps it
                ended = stat.read().rsplit(")", 1)[1].split()[0] == "Z"
            return ended and time.monotonic() - frozen_at > 1.2

        wait_for(sink_ended_and_check_due, message="the sink to end while the ventilator is frozen")
        os.kill(process.process.pid, signal.SIGTERM)
    finally:
        os.kill(process.process.pid, signal.SIGCONT)
    assert process.process.wait(20) == 0
    assert "the sink process died" not in capfd.readouterr().err


def test_the_sink_does_not_outlive_a_ventilator_killed_alone(pair, dispatcher):
    """SIGKILL to the dispatcher's own pid only (as the OOM killer does): its sink must go too, so a
    new dispatcher can bind the same ports and finish the work."""
    first = dispatcher()
    _state()
    sink = first.sink_pid()
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(10)
    wait_for(lambda: not os.path.exists(f"/proc/{sink}") or _zombie(sink), message="the orphaned sink to exit")
    again = first.start()
    worker = FakeWorker(again)
    for _ in range(3):
        task_id, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task from the new dispatcher")
        worker.give("tex_to_html", task_id, result_zip(CLEAN_LOG))
    wait_for(lambda: set(pair.values_list("status", flat=True)) == {-1}, message="every result applied")
    worker.close()
    assert again.stop() == 0


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_dispatcher_killed_mid_run_loses_and_duplicates_nothing(corpus_root, dispatcher):
    imported(corpus_root, "big", documents=20)
    activated("big")
    tasks = Task.objects.filter(corpus__name="big", service__name="tex_to_html")
    Service.objects.filter(name="tex_to_html").update(lease_seconds=2)
    ports = dispatcher()
    worker = FakeWorker(ports)
    _state()
    answered = 0
    restarted = False
    deadline = timezone.now() + timezone.timedelta(seconds=90)
    while tasks.filter(status__gte=0).exists() and timezone.now() < deadline:
        task = worker.ask("tex_to_html", timeout=3)
        if task is None:
            continue
        worker.give("tex_to_html", task[0], result_zip(WARNING_LOG))
        answered += 1
        if answered == 6 and not restarted:
            ports.restart_after_kill()  # mid-run, with results and leases in the air
            restarted = True
    ports.kill()
    assert restarted
    assert set(tasks.values_list("status", flat=True)) == {-3}
    per_task = {t.pk: LogMessage.objects.filter(task=t).count() for t in tasks}
    assert set(per_task.values()) == {3}, per_task  # exactly one result's messages each
    assert Run.objects.get(corpus__name="big").finished_at is not None
    worker.close()


def _heartbeat(process, message: dict) -> None:
    """One heartbeat from a socket of its own, as conversion.worker.Heartbeat sends it."""
    import zmq

    from conversion.wire import HEARTBEAT_TAG, heartbeat_encode

    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 2000)
    socket.connect(f"tcp://127.0.0.1:{process.ventilator_port}")
    socket.send_multipart([HEARTBEAT_TAG, heartbeat_encode(message)])
    socket.close()


def test_a_silent_worker_s_leases_are_given_back_and_a_worker_without_heartbeats_keeps_its_own(pair, dispatcher):
    Service.objects.filter(name="tex_to_html").update(lease_seconds=900)
    process = dispatcher(DISPATCHER_WORKER_SILENCE_SECONDS="5")
    beating, plain = FakeWorker(process, identity="beating:0"), FakeWorker(process, identity="plain:0")
    _state()
    held, _ = wait_for(lambda: beating.ask("tex_to_html"), message="a task")
    kept, _ = wait_for(lambda: plain.ask("tex_to_html"), message="another task")
    tally = {"task": held, "conversions": 3, "peak_rss": 512 * 1024 * 1024, "kills": {"disk": 1, "governor": 2}}
    _heartbeat(process, {"worker": "beating", "service": "tex_to_html", "threads": {"beating:0": tally}})
    row = wait_for(
        lambda: Worker.objects.filter(identity="beating:0", heartbeat_at__isnull=False).first(), message="the tallies"
    )
    assert (row.conversions, row.peak_rss, row.kills) == (3, 512 * 1024 * 1024, {"disk": 1, "governor": 2})
    assert Worker.objects.get(identity="plain:0").heartbeat_at is None
    silent_since = time.monotonic()
    # No more heartbeats: after 5 s of silence the task is TODO again, its attempt counted.
    wait_for(lambda: Task.objects.filter(pk=held, status=0).exists(), timeout=30, message="the lease given back")
    assert time.monotonic() - silent_since >= 4
    assert Task.objects.get(pk=held).attempts == 1
    assert wait_for(lambda: DispatcherState.objects.filter(released=1).first(), message="the count")
    assert Task.objects.get(pk=kept).status > 0  # no heartbeat ever: the plain lease timeout holds
    # The third task may be queued ahead of it; then it comes.
    handed = [wait_for(lambda: plain.ask("tex_to_html"), message="a task handed out")[0] for _ in range(2)]
    assert held in handed
    beating.close()
    plain.close()


def test_a_heartbeat_that_cannot_be_read_is_counted_as_garbage_and_not_answered(pair, dispatcher):
    from conversion.wire import HEARTBEAT_TAG

    process = dispatcher()
    worker = FakeWorker(process, identity="odd:0")
    _state()
    # All on one socket, kept open: a socket closed while a message still waits to go would drop it.
    dealer = worker._dealer()
    for body in (b"not json", b"[1, 2]", b'{"worker": "w", "threads": {"w:0": {"task": "x"}}}', b"{" * 70_000):
        dealer.send_multipart([HEARTBEAT_TAG, body])
    wait_for(lambda: DispatcherState.objects.filter(garbage=4).first(), message="four garbage counts")
    assert not dealer.poll(1000), "a heartbeat must not be answered"
    assert wait_for(lambda: worker.ask("tex_to_html"), message="a task after them")  # the loop lives on
    worker.close()


def test_our_request_gets_the_services_profile_with_its_task_and_a_cortex_request_the_plain_reply(pair, dispatcher):
    from conversion.profiles import DEFAULT, PRESETS, Profile, profile_load
    from conversion.wire import NO_WORK_WITH_PROFILE, PROFILE_TAG, payload_complete
    from services.actions import service_profile_set

    service_profile_set(name="tex_to_html", actor="tester", preset="arxiv")
    process = dispatcher()
    worker = FakeWorker(process)
    _state()
    assert worker.raw_request([b"no_such_service", PROFILE_TAG]) == NO_WORK_WITH_PROFILE == [b"0", b"", b""]
    assert worker.raw_request([b"tex_to_html", b"another-tag"]) == [b"0", b""]  # neither ours nor CorTeX's

    def leased(request: list[bytes]) -> list[bytes] | None:
        reply = worker.raw_request(request)
        return reply if reply is not None and reply[0] != b"0" else None

    task_id, profile, *payload = wait_for(lambda: leased([b"tex_to_html", PROFILE_TAG]), message="a task")
    assert profile == PRESETS["arxiv"].profile.canonical().encode()
    assert payload_complete(payload, 100_000) and zipfile.ZipFile(io.BytesIO(b"".join(payload))).testzip() is None
    # A CorTeX worker asks with one frame and gets CorTeX's reply: the task id, then the payload at once.
    plain_id, *plain_payload = wait_for(lambda: leased([b"tex_to_html"]), message="a task for a CorTeX worker")
    assert plain_id not in (b"0", task_id) and zipfile.ZipFile(io.BytesIO(b"".join(plain_payload))).testzip() is None
    # A change reaches the next task handed out, within a dispatcher round or two, and nothing restarts.
    changed = service_profile_set(name="tex_to_html", actor="tester", nodefaultresources=True)
    dispatcher_rounds(2)
    _, profile, *_ = wait_for(lambda: leased([b"tex_to_html", PROFILE_TAG]), message="the third task")
    assert profile == Profile(nodefaultresources=True).canonical().encode()
    assert profile == profile_load(changed.profile).canonical().encode()
    # Nothing left: each kind of request gets the no-work reply of its own shape.
    assert worker.raw_request([b"tex_to_html", PROFILE_TAG]) == [b"0", b"", b""]
    assert worker.raw_request([b"tex_to_html"]) == [b"0", b""]
    run = Run.objects.get(corpus__name="demo", service__name="tex_to_html", finished_at__isnull=True)
    assert run.profile_hashes == [
        DEFAULT.digest,
        PRESETS["arxiv"].profile.digest,
        Profile(nodefaultresources=True).digest,
    ]
    assert process.alive
    worker.close()


def test_heartbeats_put_the_engine_version_on_the_worker_rows_and_the_services_open_runs(pair, dispatcher, corpus_root):
    from services.actions import service_profile_set, service_register

    service_register(name="oxide", actor="tester", profile={"engine": "latexml-oxide"})
    activated("demo", "oxide")
    process = dispatcher()
    _state()
    engines = {"latexmlc": "latexmlc (LaTeXML version 0.8.7)", "latexml-oxide": "latexml-oxide 0.1.0"}
    threads = {"box:1": {"task": None, "conversions": 0, "peak_rss": 0, "kills": {}}}
    _heartbeat(process, {"worker": "box:1", "service": "tex_to_html", "services": ["tex_to_html", "oxide"],
                         "engines": engines, "threads": threads})  # fmt: skip
    rows = wait_for(
        lambda: (found := {w.service.name: w for w in Worker.objects.filter(identity="box:1")}) and len(found) == 2
        and found, message="a worker row for each service it serves",
    )  # fmt: skip
    assert (rows["tex_to_html"].engine, rows["tex_to_html"].engine_version) == ("latexmlc", engines["latexmlc"])
    assert (rows["oxide"].engine, rows["oxide"].engine_version) == ("latexml-oxide", "latexml-oxide 0.1.0")
    # A second worker of the fleet with another version: the run lists both, each once.
    newer = {"latexmlc": "latexmlc (LaTeXML version 0.8.8)"}
    _heartbeat(
        process, {"worker": "box:2", "service": "tex_to_html", "engines": newer, "threads": {"box:2": threads["box:1"]}}
    )
    runs = Run.objects.filter(corpus__name="demo", finished_at__isnull=True)
    wait_for(lambda: len(runs.get(service__name="tex_to_html").engine_versions) == 2, message="the second version")
    assert runs.get(service__name="tex_to_html").engine_versions == [
        "latexmlc (LaTeXML version 0.8.7)", "latexmlc (LaTeXML version 0.8.8)",
    ]  # fmt: skip
    assert runs.get(service__name="oxide").engine_versions == ["latexml-oxide 0.1.0"]
    # A worker that has not yet run the engine a service's profile names says nothing of its version.
    service_profile_set(name="oxide", actor="tester", engine="latexml-oxide-2")
    dispatcher_rounds(2)
    _heartbeat(process, {"worker": "box:1", "service": "tex_to_html", "services": ["tex_to_html", "oxide"],
                         "engines": engines, "threads": threads})  # fmt: skip
    wait_for(lambda: Worker.objects.filter(identity="box:1", service__name="oxide", engine="latexml-oxide-2").exists(),
             message="the new engine on the row")  # fmt: skip
    assert Worker.objects.get(identity="box:1", service__name="oxide").engine_version is None
    assert process.alive
