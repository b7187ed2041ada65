"""A real dispatcher process on free ports, and a fake worker speaking the CorTeX wire format."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import zmq

from conversion.wire import payload_complete, split_frames
from tests.support import PROJECT_DIR, child_env, free_port


class DispatcherProcess:
    def __init__(self, **settings: str) -> None:
        self.ventilator_port = free_port()
        self.sink_port = free_port()
        self.settings = {
            "DISPATCHER_VENTILATOR_PORT": str(self.ventilator_port),
            "DISPATCHER_SINK_PORT": str(self.sink_port),
            "DISPATCHER_REAP_SECONDS": "1",
            **settings,
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> DispatcherProcess:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "dispatcher"], cwd=PROJECT_DIR, env=child_env(**self.settings),
            start_new_session=True,
        )  # fmt: skip
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart_after_kill(self) -> DispatcherProcess:
        """SIGKILL the dispatcher (no clean-up of any kind) and start a new one on the same ports."""
        self.kill()
        return self.start()

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        return self.process.wait(20)

    def sink_pid(self) -> int:
        """The pid of the forked sink process (the dispatcher's only child)."""
        assert self.process is not None
        pid = self.process.pid

        def child() -> int | None:
            with open(f"/proc/{pid}/task/{pid}/children") as listing:
                pids = listing.read().split()
            return int(pids[0]) if pids else None

        return wait_for(child, message="the sink process")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def worker_process(
    dispatcher: DispatcherProcess,
    *extra: str,
    scratch: Path,
    service: str | None = "tex_to_html",
    concurrency: int = 2,
    **settings: str,
) -> subprocess.Popen:
    """A real `manage.py worker` of `service` (latexmlc in its sandbox) on the dispatcher's ports; its
    conversions' scratch directories go under `scratch` (a worker killed mid-task cannot remove its own,
    and must not leave it in the machine's /tmp). `scratch` must be one the sandbox user can pass through
    (the `process_tmpdir` fixture, or a directory in it), or every conversion is staged in /tmp."""
    scratch.mkdir(exist_ok=True)
    if os.geteuid() == 0:  # the sandbox runs as nobody: others' x bit on every directory up to the root
        assert all(path.stat().st_mode & 0o001 for path in (scratch, *scratch.parents)), f"{scratch} is private"
    env = child_env(
        DISPATCHER_VENTILATOR_PORT=str(dispatcher.ventilator_port), DISPATCHER_SINK_PORT=str(dispatcher.sink_port),
        TMPDIR=str(scratch), **{k: v for k, v in dispatcher.settings.items() if k.startswith("CONVERSION_")},
        **settings,
    )  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", *(["--service", service] if service else []),
         "--concurrency", str(concurrency), *extra],
        cwd=PROJECT_DIR, env=env, start_new_session=True,
    )  # fmt: skip


def process_stop(process: subprocess.Popen) -> None:
    """SIGTERM a process group started by a test, SIGKILL if it does not end in time."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


class FakeWorker:
    """Asks for work and returns results exactly as a CorTeX worker does, over real sockets."""

    def __init__(self, dispatcher: DispatcherProcess, identity: str = "fake:1", message_size: int = 100_000) -> None:
        self.dispatcher = dispatcher
        self.identity = identity
        self.message_size = message_size
        self.context = zmq.Context.instance()
        self.sink = self.context.socket(zmq.PUSH)
        self.sink.setsockopt(zmq.LINGER, 2000)
        self.sink.connect(f"tcp://127.0.0.1:{dispatcher.sink_port}")
        self.dealer: zmq.Socket | None = None

    def _dealer(self) -> zmq.Socket:
        if self.dealer is None:
            self.dealer = self.context.socket(zmq.DEALER)
            self.dealer.setsockopt(zmq.LINGER, 0)
            self.dealer.setsockopt_string(zmq.IDENTITY, self.identity)
            self.dealer.connect(f"tcp://127.0.0.1:{self.dispatcher.ventilator_port}")
        return self.dealer

    def raw_request(self, frames: list[bytes], timeout: float = 10) -> list[bytes] | None:
        dealer = self._dealer()
        dealer.send_multipart(frames)
        if not dealer.poll(int(timeout * 1000)):
            dealer.close(0)  # a dispatcher that went away: start over with a new socket
            self.dealer = None
            return None
        return dealer.recv_multipart()

    def ask(self, service: str, timeout: float = 10) -> tuple[str, bytes] | None:
        """One task (id, payload ZIP) or None when there is no work (or no answer in time)."""
        reply = self.raw_request([service.encode()], timeout)
        if reply is None or reply[0] == b"0":
            return None
        assert payload_complete(reply[1:], self.message_size), "the payload must end with a short frame"
        return reply[0].decode(), b"".join(reply[1:])

    def give(self, service: str, task_id: str, data: bytes) -> None:
        frames = split_frames(data, self.message_size) if data else [b""]
        self.sink.send_multipart([self.identity.encode(), service.encode(), task_id.encode(), *frames])

    def raw_give(self, frames: list[bytes]) -> None:
        self.sink.send_multipart(frames)

    def close(self) -> None:
        if self.dealer is not None:
            self.dealer.close(0)
        self.sink.close()


def result_zip(log: str | bytes, files: dict[str, bytes] | None = None, *, with_log: bool = True) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        if with_log:
            archive.writestr("cortex.log", log if isinstance(log, bytes) else log.encode())
        for name, data in (files or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


WARNING_LOG = (
    "(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml...\n"
    "Warning:expected:label Missing label target\n\tat doc.tex; line 3\n"
    "Error:undefined:\\foo The token \\foo is not defined.\n"
    "Status:conversion:2\nInfo:runtime_ms:42\n"
)
CLEAN_LOG = "Status:conversion:0\nInfo:runtime_ms:7\n"


def wait_for(predicate, timeout: float = 20, interval: float = 0.1, message="condition"):
    """The first true value of `predicate()` before `timeout`; else an AssertionError naming `message`
    (a string, or a callable asked for it then, to describe the state at the time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {message() if callable(message) else message}")


def process_tree(pid: int) -> str:
    """`pid` and everything below it, a line each (process id, state, CPU seconds, command), for the message
    of a test that waited in vain for one of them."""
    import psutil

    lines = []
    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                cpu = sum(process.cpu_times()[:2])
                lines.append(f"{process.pid} {process.status()} {cpu:.2f}s {' '.join(process.cmdline())[:200]}")
    except psutil.NoSuchProcess:
        lines.append(f"{pid} gone")
    return "\n".join(lines)


def dispatcher_rounds(count: int) -> None:
    """Wait until the dispatcher has written its heartbeat `count` times from now on. It rereads the
    services and drops queued tasks no longer leased in the same once-a-second round, right after the
    heartbeat: two rounds from now, both have seen every change made before the call."""
    from django.utils import timezone

    from services.models import DispatcherState

    since = timezone.now()
    for _ in range(count):
        since = wait_for(
            lambda since=since: DispatcherState.objects.filter(heartbeat_at__gt=since)
            .values_list("heartbeat_at", flat=True)
            .first(),
            timeout=60, message="a dispatcher round",
        )  # fmt: skip
