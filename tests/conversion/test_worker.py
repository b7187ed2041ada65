"""The worker client against a test-local fake dispatcher (ROUTER ventilator + PULL sink) on real sockets,
converting with the real latexmlc (apt-get install latexml); a missing one fails the tests."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq
from django.core.management import CommandError, call_command

from conversion.choices import TaskStatus
from conversion.engine import EngineMissing, latexmlc_path
from conversion.logparse import parse_log
from conversion.machine import concurrency_auto
from conversion.profiles import DEFAULT, Profile
from conversion.wire import (
    HEARTBEAT_TAG,
    NO_WORK_WITH_PROFILE,
    PROFILE_TAG,
    heartbeat_decode,
    join_frames,
    payload_complete,
    split_frames,
)
from conversion.worker import InvalidPayload, run_worker, unpack_payload, worker_identities
from tests.support import PROJECT_DIR, installed_latexmlc_version

MESSAGE_SIZE = 1000
SERVICE = b"tex_to_html"
IDENTITY = "test-worker"
NO_WORK = NO_WORK_WITH_PROFILE
MAIN_TEX = "\\documentclass{article}\n\\begin{document}\nThe main text.\n\\input{intro}\n\\end{document}\n"
# Stored uncompressed and long, so the payload spans several frames of MESSAGE_SIZE.
INTRO_TEX = "Introduction marker sentence. " + " ".join(f"word{index}" for index in range(600)) + "\n"
LOOPING = "\\documentclass{article}\n\\begin{document}\n\\loop\\iftrue\\repeat\n\\end{document}\n"


def zip_bytes(members: dict[str, str], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


GOOD_PAYLOAD = zip_bytes({"main.tex": MAIN_TEX, "intro.tex": INTRO_TEX})


@dataclass
class FakeDispatcher:
    context: zmq.Context
    ventilator: zmq.Socket
    sink: zmq.Socket
    ventilator_port: int
    sink_port: int

    heartbeats: list[dict] = field(default_factory=list)

    def next_request(self, timeout: float = 15) -> list[bytes]:
        """The next request for work, [routing id, service] (it must ask for the service's profile);
        heartbeats that come meanwhile are kept in `heartbeats`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self.ventilator.poll(int(remaining * 1000)), "the worker did not ask for work"
            frames = self.ventilator.recv_multipart()
            if len(frames) == 3 and frames[1] == HEARTBEAT_TAG:
                self.heartbeats.append(heartbeat_decode(frames[2]))
                continue
            assert len(frames) == 3 and frames[2] == PROFILE_TAG, frames
            return frames[:2]

    def next_heartbeat(self, timeout: float = 15) -> dict:
        """The next heartbeat (requests for work that come meanwhile get no answer)."""
        deadline = time.monotonic() + timeout
        while not self.heartbeats:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self.ventilator.poll(int(remaining * 1000)), "no heartbeat came"
            frames = self.ventilator.recv_multipart()
            if len(frames) == 3 and frames[1] == HEARTBEAT_TAG:
                self.heartbeats.append(heartbeat_decode(frames[2]))
        return self.heartbeats.pop(0)

    def hand(self, routing_id: bytes, frames: list[bytes]) -> None:
        self.ventilator.send_multipart([routing_id, *frames])

    def hand_task(self, task_id: bytes, payload: bytes, profile: bytes = DEFAULT.canonical().encode()) -> None:
        routing_id, service = self.next_request()
        assert (routing_id, service) == (IDENTITY.encode(), SERVICE)
        self.hand(routing_id, [task_id, profile, *split_frames(payload, MESSAGE_SIZE)])

    def next_result(self, timeout: float = 90) -> list[bytes]:
        assert self.sink.poll(int(timeout * 1000)), "no result reached the sink"
        return self.sink.recv_multipart()

    def restart_ventilator(self, *, down_until: Callable[[], bool]) -> None:
        """Close the ROUTER and bind a new one on the same port, as a restarted dispatcher would; it stays
        down until `down_until()` is true (e.g. until the worker has noticed)."""
        self.ventilator.close(linger=0)
        deadline = time.monotonic() + 30
        while not down_until():
            assert time.monotonic() < deadline, "the condition for coming back never held"
            time.sleep(0.05)
        self.ventilator = self.context.socket(zmq.ROUTER)
        self.ventilator.setsockopt(zmq.LINGER, 0)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.ventilator.bind(f"tcp://127.0.0.1:{self.ventilator_port}")
                return
            except zmq.ZMQError:
                # The old socket's close is asynchronous: the port may be free a moment later.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@pytest.fixture
def latexmlc() -> str:
    # Raises EngineMissing ("... apt-get install latexml") instead of skipping.
    return latexmlc_path()


@pytest.fixture
def dispatcher() -> Iterator[FakeDispatcher]:
    context = zmq.Context()
    ventilator = context.socket(zmq.ROUTER)
    ventilator.setsockopt(zmq.LINGER, 0)
    sink = context.socket(zmq.PULL)
    sink.setsockopt(zmq.LINGER, 0)
    fake = FakeDispatcher(
        context=context,
        ventilator=ventilator,
        sink=sink,
        ventilator_port=ventilator.bind_to_random_port("tcp://127.0.0.1"),
        sink_port=sink.bind_to_random_port("tcp://127.0.0.1"),
    )
    yield fake
    fake.ventilator.close(linger=0)
    fake.sink.close(linger=0)
    context.term()


@dataclass
class RunningWorker:
    stop: threading.Event
    thread: threading.Thread
    errors: list[BaseException]

    def shut_down(self, within: float = 30) -> float:
        started = time.monotonic()
        self.stop.set()
        self.thread.join(within)
        assert not self.thread.is_alive(), "the worker did not stop"
        assert self.errors == []
        return time.monotonic() - started


def start_worker(
    dispatcher: FakeDispatcher, *, timeout: float = 60, service: str | list[str] = "tex_to_html", **options: Any
) -> RunningWorker:
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run_worker(
                ventilator=f"tcp://127.0.0.1:{dispatcher.ventilator_port}",
                sink=f"tcp://127.0.0.1:{dispatcher.sink_port}",
                service=service,
                concurrency=1,
                identity=IDENTITY,
                timeout=timeout,
                message_size=MESSAGE_SIZE,
                reply_timeout=1.0,
                stop=stop,
                **options,
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return RunningWorker(stop=stop, thread=thread, errors=errors)


@pytest.fixture
def worker(dispatcher: FakeDispatcher, latexmlc: str) -> Iterator[RunningWorker]:
    running = start_worker(dispatcher)
    yield running
    running.shut_down()


def result_of(frames: list[bytes], task_id: bytes) -> zipfile.ZipFile:
    identity, service, returned_task, *data = frames
    assert (identity, service, returned_task) == (IDENTITY.encode(), SERVICE, task_id)
    assert data and payload_complete(data, MESSAGE_SIZE)
    assert all(len(frame) == MESSAGE_SIZE for frame in data[:-1])
    return zipfile.ZipFile(io.BytesIO(join_frames(data)))


def assert_converted(archive: zipfile.ZipFile) -> None:
    log = archive.read("cortex.log")
    assert re.search(rb"^Status:conversion:0$", log, re.MULTILINE)
    assert re.search(rb"^Info:runtime_ms:\d+$", log, re.MULTILINE)
    assert "Introduction marker sentence." in archive.read("main.html").decode()


def assert_invalid(archive: zipfile.ZipFile) -> bytes:
    log = archive.read("cortex.log")
    assert log.startswith(b"Fatal:invalid:archive ")
    assert log.rstrip().endswith(b"Status:conversion:3")
    return log


@pytest.mark.slow
def test_a_task_in_many_frames_comes_back_converted_with_log_and_html(dispatcher, worker):
    payload_frames = split_frames(GOOD_PAYLOAD, MESSAGE_SIZE)
    assert len(payload_frames) > 3
    dispatcher.hand_task(b"42", GOOD_PAYLOAD)
    frames = dispatcher.next_result()
    assert len(frames) > 4  # the result, too, travels in several frames
    archive = result_of(frames, b"42")
    assert archive.namelist()[0] == "cortex.log"
    assert_converted(archive)
    assert any(name.endswith(".css") for name in archive.namelist())


@pytest.mark.slow
def test_a_document_wrapped_in_a_folder_is_converted_from_that_folder(dispatcher, worker):
    payload = zip_bytes({"paper/main.tex": MAIN_TEX, "paper/intro.tex": INTRO_TEX})
    dispatcher.hand_task(b"43", payload)
    assert_converted(result_of(dispatcher.next_result(), b"43"))


@pytest.mark.slow
def test_bad_payloads_get_an_invalid_result_and_the_worker_keeps_serving(dispatcher, worker):
    escapee = f"escapee-{uuid.uuid4().hex}.tex"
    dispatcher.hand_task(b"7", b"this is not a zip archive")
    assert b"not a readable zip" in assert_invalid(result_of(dispatcher.next_result(), b"7"))

    dispatcher.hand_task(b"8", zip_bytes({f"../../{escapee}": MAIN_TEX, "main.tex": MAIN_TEX}))
    assert b"escapes" in assert_invalid(result_of(dispatcher.next_result(), b"8"))

    dispatcher.hand_task(b"9", zip_bytes({f"{tempfile.gettempdir()}/{escapee}": MAIN_TEX}))
    assert b"escapes" in assert_invalid(result_of(dispatcher.next_result(), b"9"))

    dispatcher.hand_task(b"10", zip_bytes({"readme.txt": "no TeX here"}))
    assert b"no .tex file" in assert_invalid(result_of(dispatcher.next_result(), b"10"))

    assert not (Path(tempfile.gettempdir()) / escapee).exists()
    dispatcher.hand_task(b"11", GOOD_PAYLOAD)
    assert_converted(result_of(dispatcher.next_result(), b"11"))


@pytest.mark.slow
def test_a_result_over_the_limit_comes_back_as_its_log_with_a_message_that_makes_the_task_invalid(dispatcher, latexmlc):
    limit = 2000  # the converted HTML and its CSS, deflated, take several times that
    running = start_worker(dispatcher, result_max_bytes=limit)
    try:
        dispatcher.hand_task(b"44", GOOD_PAYLOAD)
        data = join_frames(dispatcher.next_result()[3:])
    finally:
        running.shut_down()
    assert len(data) <= limit
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.namelist() == ["cortex.log"]  # no file of the conversion travels
    log = archive.read("cortex.log")
    assert re.search(rb"^Fatal:invalid:too_large the result archive passes the limit of 2000 bytes", log, re.M)
    assert re.search(rb"^Status:conversion:0$", log, re.M)  # the conversion itself went through
    assert parse_log(log).status == TaskStatus.INVALID


@pytest.mark.slow
def test_a_binding_that_fills_the_disk_ends_fatal_at_the_workers_disk_limit(dispatcher, latexmlc):
    filler = (
        "package LaTeXML::Package::Pool;\nuse LaTeXML::Package;\nmy $chunk = 'x' x 1048576;\n"
        "for my $i (1 .. 100000) { open(my $fh, '>', \"/tmp/fill$i\") or last; print $fh $chunk; close($fh); }\n1;\n"
    )
    document = "\\documentclass{article}\n\\usepackage{filler}\n\\begin{document}\nHi.\n\\end{document}\n"
    running = start_worker(dispatcher, disk_mb=30)
    try:
        dispatcher.hand_task(b"45", zip_bytes({"main.tex": document, "filler.sty.ltxml": filler}))
        log = result_of(dispatcher.next_result(), b"45").read("cortex.log")
    finally:
        running.shut_down()
    assert b"Fatal:limit:disk the conversion wrote more than its disk limit of 30 MB" in log
    assert parse_log(log).status == TaskStatus.FATAL


@pytest.mark.slow
def test_the_worker_asks_again_after_no_work_and_survives_a_ventilator_restart(dispatcher, worker, caplog):
    caplog.set_level(logging.INFO, logger="conversion.worker")
    routing_id, service = dispatcher.next_request()
    assert (routing_id, service) == (IDENTITY.encode(), SERVICE)
    dispatcher.hand(routing_id, NO_WORK)
    # No work: it waits a little and asks again.
    assert dispatcher.next_request(timeout=5)[1] == SERVICE

    # That request goes unanswered: the dispatcher dies, and comes back on the same port once the worker
    # has given up waiting for the answer (whatever the time that takes on this machine).
    dispatcher.restart_ventilator(down_until=lambda: "no answer from" in caplog.text)
    dispatcher.hand_task(b"77", GOOD_PAYLOAD)
    assert_converted(result_of(dispatcher.next_result(), b"77"))


@pytest.mark.slow
def test_stopping_the_worker_kills_the_running_conversion_and_sends_no_result(dispatcher, latexmlc):
    running = start_worker(dispatcher, timeout=120)
    dispatcher.hand_task(b"5", zip_bytes({"loop.tex": LOOPING}))
    marker = "cortex-task-"

    def conversion_running() -> bool:
        for process in psutil.Process().children(recursive=True):
            try:
                if marker in " ".join(process.cmdline()):
                    return True
            except psutil.NoSuchProcess:
                continue
        return False

    deadline = time.monotonic() + 20
    while not conversion_running():
        assert time.monotonic() < deadline, "latexmlc never started"
        time.sleep(0.1)
    assert running.shut_down() < 10
    assert not conversion_running()
    assert not dispatcher.sink.poll(500), "a cancelled conversion must not be reported"


def test_unpacking_refuses_archives_over_the_size_or_member_cap(tmp_path):
    with pytest.raises(InvalidPayload, match="more than 1000 bytes"):
        unpack_payload(zip_bytes({"a.tex": "x" * 2000}, zipfile.ZIP_DEFLATED), tmp_path / "a", max_bytes=1000)
    with pytest.raises(InvalidPayload, match="more than 2 members"):
        unpack_payload(zip_bytes({"a.tex": "", "b.tex": "", "c.tex": ""}), tmp_path / "b", max_members=2)
    unpack_payload(zip_bytes({"d/a.tex": "x" * 500}), tmp_path / "c", max_bytes=1000)
    assert (tmp_path / "c" / "d" / "a.tex").read_text() == "x" * 500


def test_worker_identities_add_the_thread_index_when_there_are_several():
    assert worker_identities("box:12", 1) == ["box:12"]
    assert worker_identities("box:12", 3) == ["box:12:0", "box:12:1", "box:12:2"]
    assert re.fullmatch(r".+:\d+", worker_identities(None, 1)[0])


def test_run_worker_without_latexmlc_raises_engine_missing():
    with pytest.raises(EngineMissing, match="apt-get install latexml"):
        run_worker(ventilator="tcp://127.0.0.1:1", sink="tcp://127.0.0.1:2", service="x", latexmlc="no-latexmlc-here")


def test_manage_worker_without_latexmlc_is_one_command_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CommandError, match=r"^latexmlc is not installed: apt-get install latexml$"):
        call_command("worker", "--service", "tex_to_html", "--concurrency", "2")


@pytest.mark.slow
def test_a_worker_with_concurrency_auto_serves_one_thread_per_conversion_it_picked(dispatcher, latexmlc):
    """Run as a worker machine runs it; every thread asks the (test-local) ventilator for work."""
    expected = set(worker_identities("auto-worker", concurrency_auto(64)))
    process = subprocess.Popen(
        [sys.executable, "-m", "conversion.worker", "--ventilator", f"tcp://127.0.0.1:{dispatcher.ventilator_port}",
         "--sink", f"tcp://127.0.0.1:{dispatcher.sink_port}", "--service", "tex_to_html", "--identity",
         "auto-worker", "--concurrency", "auto", "--memory-mb", "64"],
        cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        asked: set[str] = set()
        while asked != expected:
            identity = dispatcher.next_request(timeout=30)[0].decode()
            assert identity in expected, (identity, expected)
            asked.add(identity)
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.slow
def test_the_worker_s_heartbeats_name_its_task_while_it_converts_and_count_it_after(dispatcher, latexmlc):
    """From a socket of its own: one at start, one when a conversion starts (naming the task), one when
    it ends (its tally counted), and one every heartbeat_seconds."""
    running = start_worker(dispatcher, heartbeat_seconds=30, memory_floor_mb=1)
    try:
        first = dispatcher.next_heartbeat()
        assert (first["worker"], first["service"], first["interval"]) == (IDENTITY, SERVICE.decode(), 30)
        assert first["services"] == [SERVICE.decode()]
        assert first["engines"] == {"latexmlc": installed_latexmlc_version()}  # its own, known from the start
        assert first["threads"] == {IDENTITY: {"task": None, "conversions": 0, "peak_rss": 0, "kills": {}}}
        assert first["governor"]["floor"] == 1024 * 1024 and first["governor"]["paused"] is False
        dispatcher.hand_task(b"42", GOOD_PAYLOAD)
        assert dispatcher.next_heartbeat()["threads"][IDENTITY]["task"] == "42"
        assert_converted(result_of(dispatcher.next_result(), b"42"))
        after = dispatcher.next_heartbeat()["threads"][IDENTITY]
        assert (after["task"], after["conversions"], after["kills"]) == (None, 1, {})
        assert after["peak_rss"] > 10 * 1024 * 1024  # LaTeXML's resident size, measured while it ran
    finally:
        running.shut_down()


def test_scratch_directories_of_processes_gone_are_swept_and_others_kept(tmp_path):
    """A process killed outright leaves its scratch directory; the next sweep removes it, never one of a
    live process or a directory of another name."""
    from conversion.processes import scratch_prefix, scratch_sweep

    child = subprocess.run(
        [sys.executable, "-c", "import os, tempfile, sys; from conversion.processes import scratch_prefix;"
         " d = tempfile.mkdtemp(prefix=scratch_prefix('cortex-task-'), dir=sys.argv[1]);"
         " open(os.path.join(d, 'source.tex'), 'w').write('x'); os.kill(os.getpid(), 9)", str(tmp_path)],
        cwd=PROJECT_DIR, check=False,
    )  # fmt: skip
    assert child.returncode == -9
    [killed] = tmp_path.iterdir()
    live = Path(tempfile.mkdtemp(prefix=scratch_prefix("cortex-text-"), dir=tmp_path))
    other = tmp_path / "cortex-task-notapid"
    other.mkdir()
    assert scratch_sweep([str(tmp_path)]) == 1
    assert sorted(tmp_path.iterdir()) == sorted([live, other]) and not killed.exists()


def profile_frame(**options: Any) -> bytes:
    return Profile(**options).canonical().encode()


def html_of(archive: zipfile.ZipFile) -> str:
    return archive.read("main.html").decode()


@pytest.mark.slow
def test_each_task_is_converted_with_the_profile_it_came_with(dispatcher, worker):
    dispatcher.hand_task(b"61", GOOD_PAYLOAD, profile=profile_frame())
    plain = result_of(dispatcher.next_result(), b"61")
    assert_converted(plain)
    assert '<link rel="stylesheet" href="LaTeXML.css"' in html_of(plain) and "LaTeXML.css" in plain.namelist()
    dispatcher.hand_task(b"62", GOOD_PAYLOAD, profile=profile_frame(nodefaultresources=True))
    bare = result_of(dispatcher.next_result(), b"62")
    assert_converted(bare)
    assert "LaTeXML.css" not in html_of(bare) and "LaTeXML.css" not in bare.namelist()
    dispatcher.hand_task(b"63", GOOD_PAYLOAD, profile=profile_frame())
    assert "LaTeXML.css" in html_of(result_of(dispatcher.next_result(), b"63"))  # nothing carried over


@pytest.mark.slow
def test_a_profile_the_worker_cannot_run_is_a_refused_result_and_the_worker_keeps_serving(dispatcher, worker):
    refusals = {
        b"71": profile_frame(css=("/srv/profiles/ar5iv.css",)),  # the worker has no profile roots
        b"72": profile_frame(engine="latexml-oxide-not-installed"),
        b"73": b"{not json",
        b"74": b'{"pmml": true, "extra_args": ["--strict"]}',
    }
    reasons = {
        b"71": b"css: a stylesheet must lie inside the profile roots, and none are configured",
        b"72": b"the engine latexml-oxide-not-installed is not", b"73": b"not a profile",
        b"74": b"extra_args: not an option of a profile",
    }  # fmt: skip
    for task_id, frame in refusals.items():
        dispatcher.hand_task(task_id, GOOD_PAYLOAD, profile=frame)
        archive = result_of(dispatcher.next_result(), task_id)
        log = archive.read("cortex.log")
        assert log.startswith(f"Fatal:profile:refused the worker {IDENTITY} refuses the profile: ".encode()), log
        assert reasons[task_id] in log and parse_log(log).status == TaskStatus.FATAL
        assert archive.namelist() == ["cortex.log"]
    dispatcher.hand_task(b"75", GOOD_PAYLOAD)
    assert_converted(result_of(dispatcher.next_result(), b"75"))


@pytest.mark.slow
def test_the_profiles_timeout_holds_within_the_workers_own_ceiling(dispatcher, latexmlc):
    running = start_worker(dispatcher, timeout=4)
    try:
        for task_id, profile, limit in (
            (b"81", profile_frame(timeout_seconds=1), 1),
            (b"82", profile_frame(timeout_seconds=1200), 4),
        ):
            dispatcher.hand_task(task_id, zip_bytes({"loop.tex": LOOPING}), profile=profile)
            log = result_of(dispatcher.next_result(), task_id).read("cortex.log")
            assert f"Fatal:timeout:timedout Conversion exceeded the timeout of {limit} seconds".encode() in log, log
    finally:
        running.shut_down()


@pytest.mark.slow
def test_a_worker_of_several_services_asks_for_each_in_turn_and_answers_under_the_tasks_own(dispatcher, latexmlc):
    running = start_worker(dispatcher, service=["first", "second"])
    try:
        asked = []
        for _ in range(4):
            routing_id, service = dispatcher.next_request()
            asked.append(service)
            dispatcher.hand(routing_id, NO_WORK)
        assert asked == [b"first", b"second", b"first", b"second"]
        routing_id, service = dispatcher.next_request()
        dispatcher.hand(routing_id, [b"91", profile_frame(), *split_frames(GOOD_PAYLOAD, MESSAGE_SIZE)])
        identity, returned_service, task_id, *_ = dispatcher.next_result()
        assert (identity, returned_service, task_id) == (IDENTITY.encode(), service, b"91")
        assert dispatcher.next_heartbeat()["services"] == ["first", "second"]
    finally:
        running.shut_down()
