"""The worker client, wire-compatible with CorTeX: ask the ventilator for a task, convert it with
latexmlc, push the result ZIP to the sink. Needs only Python, latexmlc and pyzmq:

    python -m conversion.worker --ventilator tcp://host:51695 --sink tcp://host:51696 \\
        --service tex_to_html [--service other ...] --concurrency 2|auto [--timeout 300] [--memory-mb 4096] \\
        [--result-max-bytes N] [--disk-mb 2048] [--max-processes 64] [--memory-floor-mb 1024] \\
        [--profile-roots /srv/profiles:...] [--sandbox bwrap|none]

Each request names one service and asks for its converter profile (conversion.profiles; the request is
`[service, PROFILE_TAG]`, conversion.wire), so one worker serves several services, each thread asking
for them in turn. The worker checks the profile again against its own roots (`--profile-roots`,
CONVERSION_PROFILE_ROOTS), runs the profile's engine with the profile's options, and keeps its timeout
and memory within its own `--timeout` and `--memory-mb`: those are the ceiling on this machine. A
profile it cannot run (an engine it lacks, a path outside its roots) gets a `Fatal:profile:refused`
result saying why. The first use of an engine asks it for its version (`ENGINE --VERSION`, once per
executable), which the heartbeats report.

After a conversion that finished, the worker compares its HTML with its TeX source
(conversion.output_checks) and appends what the page lost to the log, each loss a message of its own
category and a status line no better than the worst (docs/decisions/output-checks.md).

Every conversion runs in the bubblewrap sandbox (conversion.sandbox) unless `--sandbox none` (or
CONVERSION_SANDBOX=none) is given; a worker whose sandbox cannot start refuses to run.

Beside the CorTeX protocol the worker sends heartbeats to the ventilator from a socket of its own: a
two-frame message (`cortex-heartbeat`, JSON) every HEARTBEAT_SECONDS and whenever a conversion starts or
ends, naming the task each of its threads converts and their tallies (conversions, peak resident size,
kills by reason). Our dispatcher gives back the leases of a worker whose heartbeats stop; an unmodified
CorTeX worker sends none and keeps the plain lease timeout. The memory governor (conversion.governor)
stops the largest conversion when the machine runs short of memory; its result says so, and the
dispatcher tries the task again.

A bad payload is answered with a `Fatal:invalid:archive` result and the loop goes on; a conversion
whose result archive would pass `--result-max-bytes` (the dispatcher's RESULT_MAX_BYTES) is answered
with its log and a `Fatal:invalid:too_large` message, without its files. A dispatcher that goes away is
waited for (the request is resent on a fresh socket), never blocked on forever.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import zmq

from conversion import cgroups, engine
from conversion import sandbox as sandboxes
from conversion.archive import inspect_entry
from conversion.choices import Category, LatexmlStatus, SandboxMode, SandboxProc
from conversion.governor import Governor
from conversion.machine import concurrency_auto
from conversion.output_checks import check_conversion
from conversion.processes import scratch_prefix, scratch_sweep
from conversion.profiles import (
    ENGINE_DEFAULT,
    Invocation,
    ProfileInvalid,
    ProfileRefused,
    invocation,
    profile_parse,
    roots_check,
)
from conversion.sandbox import MODES, PROCS, Sandbox
from conversion.wire import (
    DEFAULT_MESSAGE_SIZE,
    HEARTBEAT_TAG,
    PROFILE_TAG,
    heartbeat_encode,
    join_frames,
    payload_complete,
    split_frames,
)
from conversion.zips import member_name_problem

logger = logging.getLogger(__name__)

NO_WORK_TASK_ID = b"0"
# How long to wait for the ventilator's answer before assuming it restarted and asking again.
REPLY_TIMEOUT_SECONDS = 20.0
NO_WORK_FIRST_WAIT_SECONDS = 0.25
NO_WORK_MAX_WAIT_SECONDS = 0.5
UNPACK_MAX_BYTES = 1024**3
# The dispatcher makes a bigger result invalid (RESULT_MAX_BYTES); the worker keeps to the same default.
RESULT_MAX_BYTES = 64 * 1024 * 1024
UNPACK_MAX_MEMBERS = 20_000
RECONNECT_IVL_MS = 250
RECONNECT_IVL_MAX_MS = 5_000
# A few queued requests or results at most: a worker that cannot reach its peer should wait, not pile up.
SNDHWM = 16
# Results still queued when the worker stops get this long to reach the sink.
SINK_LINGER_MS = 5_000
_SLICE_SECONDS = 0.25
_COPY_CHUNK = 1024 * 1024
# A heartbeat this often while the worker runs (and at each conversion's start and end); the dispatcher
# gives a worker's leases back after DISPATCHER_WORKER_SILENCE_SECONDS (60) without one.
HEARTBEAT_SECONDS = 10.0
DEFAULT_MEMORY_FLOOR_MB = 1024


class InvalidPayload(ValueError):
    """The task payload is not a ZIP that can be unpacked safely."""


def unpack_payload(
    data: bytes, dest: Path, *, max_bytes: int = UNPACK_MAX_BYTES, max_members: int = UNPACK_MAX_MEMBERS
) -> None:
    """Unpack a ZIP payload into `dest`, refusing members that escape it and archives that are too big."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > max_members:
                raise InvalidPayload(f"the archive has more than {max_members} members")
            if sum(member.file_size for member in members) > max_bytes:
                raise InvalidPayload(f"the archive unpacks to more than {max_bytes} bytes")
            dest.mkdir(parents=True, exist_ok=True)
            root = dest.resolve()
            written = 0
            for member in members:
                target = _member_target(root, member.filename, directory=member.is_dir())
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, open(target, "wb") as sink:
                    # Counted as written, not as declared: a member may claim less than it holds.
                    while chunk := source.read(_COPY_CHUNK):
                        written += len(chunk)
                        if written > max_bytes:
                            raise InvalidPayload(f"the archive unpacks to more than {max_bytes} bytes")
                        sink.write(chunk)
    except InvalidPayload:
        raise
    except (
        zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError
    ) as exc:  # fmt: skip
        raise InvalidPayload(f"not a readable zip archive: {exc}") from exc
    except OSError as exc:
        # A full disk is the machine's problem, not the document's: let the caller report it as such.
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise InvalidPayload(f"cannot unpack the archive: {exc}") from exc


def _member_target(root: Path, name: str, *, directory: bool = False) -> Path:
    why = member_name_problem(name, directory=directory)
    if why is not None:
        raise InvalidPayload(f"member escapes the archive ({why}): {name!r}")
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if not parts:
        raise InvalidPayload(f"member has no name: {name!r}")
    target = root.joinpath(*parts)
    if not target.resolve().is_relative_to(root):
        raise InvalidPayload(f"member escapes the archive: {name}")
    return target


class ResultTooLarge(ValueError):
    """The result archive would pass the limit the dispatcher keeps."""


def result_archive(log: bytes, output_dir: Path | None = None, *, max_bytes: int | None = None) -> bytes:
    """The result ZIP: `cortex.log` at the root, then the regular files of `output_dir`. It is built in a
    temporary file, so a huge output costs disk the conversion already used rather than memory, and
    raises ResultTooLarge as soon as it passes `max_bytes` (checked after each file)."""
    with tempfile.TemporaryFile(prefix="cortex-result-") as spool:
        with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(engine.LOG_NAME, log)
            if output_dir is not None:
                for root, dirs, files in os.walk(output_dir, followlinks=False):
                    dirs.sort()
                    for file in sorted(files):
                        path = Path(root) / file
                        # A link could point anywhere on the worker machine: only regular files travel.
                        if path.is_file() and not path.is_symlink():
                            name = path.relative_to(output_dir).as_posix()
                            archive.write(path, name)
                            if max_bytes is not None and spool.tell() > max_bytes:
                                raise ResultTooLarge(f"{spool.tell()} bytes with {name}")
        spool.seek(0)
        return spool.read()


def too_large_result(log: bytes, max_bytes: int, why: str) -> bytes:
    """The result of a conversion whose files would pass `max_bytes`: its log (cut to fit) and a
    Fatal:invalid:too_large message that names the limit, which makes the task invalid."""
    line = f"Fatal:{Category.INVALID}:too_large the result archive passes the limit of {max_bytes} bytes ({why})\n"
    room = max(0, max_bytes // 2 - len(line))
    kept = log if len(log) <= room else log[: room // 2] + b"\n...\n" + log[-(room // 2) :]
    return result_archive(kept + (b"" if kept.endswith(b"\n") else b"\n") + line.encode())


def fatal_result(category: str, what: str, why: str) -> bytes:
    """A result ZIP whose log holds one Fatal message and a fatal status."""
    details = " ".join(why.split())
    log = f"Fatal:{category}:{what} {details}\nStatus:conversion:{LatexmlStatus.FATAL}\n"
    return result_archive(log.encode())


@dataclass(frozen=True)
class Converted:
    """One task's result ZIP, and what the worker tallies of it."""

    result: bytes
    killed: str | None = None  # a KillReason
    peak_rss: int = 0


def convert_payload(payload: bytes, **options: object) -> bytes:
    """The result ZIP for one task payload (convert_task's result; the same options)."""
    return convert_task(payload, **options).result  # type: ignore[arg-type]


def convert_task(
    payload: bytes,
    *,
    timeout: float = engine.DEFAULT_TIMEOUT_SECONDS,
    memory_mb: int = engine.DEFAULT_MEMORY_MB,
    latexmlc: str = "latexmlc",
    cancel: threading.Event | None = None,
    sandbox: Sandbox = sandboxes.DEFAULT,
    result_max_bytes: int = RESULT_MAX_BYTES,
    disk_mb: int = engine.DEFAULT_DISK_MB,
    max_processes: int = engine.DEFAULT_MAX_PROCESSES,
    watch: engine.Watch | None = None,
    extra_args: tuple[str, ...] = (),
    read_only: tuple[Path, ...] = (),
) -> Converted:
    """The result ZIP for one task payload; an unusable payload gives a Fatal:invalid:archive result, one
    whose archive would pass `result_max_bytes` its log with a Fatal:invalid:too_large message. A `watch`
    lets the worker's governor see the conversion and stop it. `extra_args` and `read_only` are a
    profile's options and the paths they need (conversion.profiles.Invocation)."""
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("cortex-task-")) as work:
        # Passable, not listable: the sandbox user (nobody, when we are root) reaches source/ through it.
        os.chmod(work, 0o711)  # noqa: S103
        source = Path(work) / "source"
        try:
            unpack_payload(payload, source)
        except InvalidPayload as exc:
            return Converted(fatal_result(Category.INVALID, "archive", str(exc)))
        entry = inspect_entry(source, "payload")
        if entry.problem:
            return Converted(fatal_result(Category.INVALID, "archive", entry.detail or entry.problem))
        main = PurePosixPath(entry.main_file)
        # A ZIP that wraps the document in a folder has its main file there; TeX resolves \input from it.
        # The run sees the whole payload, as it would unsandboxed: a file may \input ../shared.tex.
        conversion = engine.convert(
            source / main.parent, main.name, timeout=timeout, memory_mb=memory_mb, disk_mb=disk_mb, latexmlc=latexmlc,
            cancel=cancel, sandbox=sandbox, root=source, max_processes=max_processes, watch=watch,
            extra_args=extra_args, read_only=read_only,
        )  # fmt: skip
        log = conversion.log + checked(conversion, source / main.parent, main.name, root=source)
        try:
            result = result_archive(log, conversion.output_dir, max_bytes=result_max_bytes)
        except ResultTooLarge as exc:
            result = too_large_result(log, result_max_bytes, str(exc))
        return Converted(result, conversion.killed, conversion.peak_rss)


def checked(conversion: engine.Conversion, source_dir: Path, main_file: str, *, root: Path) -> bytes:
    """The output checks' log lines for a conversion that finished (conversion.output_checks): nothing for
    one that ended fatal, whose status already says the worst."""
    if conversion.status_code is None or conversion.status_code >= LatexmlStatus.FATAL:
        return b""
    lines = check_conversion(
        source_dir, main_file, conversion.output_dir, status_code=conversion.status_code, root=root
    )
    return "".join(f"{line}\n" for line in lines).encode()


@dataclass
class Tally:
    """One worker thread's work since the worker started, as its heartbeats report it."""

    task: str | None = None  # the task it converts now
    conversions: int = 0
    peak_rss: int = 0
    kills: dict[str, int] = field(default_factory=dict)
    started: float = 0.0  # monotonic time the task was taken
    timeout: float | None = None  # its conversion's timeout, once its profile is read

    def take(self, task: str | None) -> None:
        self.task, self.started, self.timeout = task, time.monotonic(), None

    def as_json(self) -> dict[str, object]:
        message: dict[str, object] = {
            "task": self.task, "conversions": self.conversions, "peak_rss": self.peak_rss, "kills": dict(self.kills)
        }  # fmt: skip
        if self.task is not None:  # how long it has converted, and its limit: the operators' in-flight list
            message["elapsed"] = round(time.monotonic() - self.started, 1)
            message["timeout"] = self.timeout
        return message


class _WorkerLoop:
    """One worker thread: its own DEALER and PUSH sockets (zmq sockets are not thread-safe)."""

    def __init__(
        self,
        *,
        context: zmq.SyncContext,
        ventilator: str,
        sink: str,
        services: list[str],
        identity: str,
        timeout: float,
        memory_mb: int,
        message_size: int,
        reply_timeout: float,
        latexmlc: str,
        sandbox: Sandbox,
        stop: threading.Event,
        result_max_bytes: int = RESULT_MAX_BYTES,
        disk_mb: int = engine.DEFAULT_DISK_MB,
        max_processes: int = engine.DEFAULT_MAX_PROCESSES,
        governor: Governor | None = None,
        beat: Callable[[], None] = lambda: None,
        profile_roots: tuple[Path, ...] = (),
        engines: dict[str, str] | None = None,
    ) -> None:
        self.context = context
        self.ventilator_endpoint = ventilator
        self.sink_endpoint = sink
        # The services served, shared with run_worker's caller, which may change them while the worker runs
        # (`manage.py worker --all-services`); each round of requests reads them anew.
        self.services = services
        self.asking = 0  # the index of the service the next request names
        self.identity = identity.encode()
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.message_size = message_size
        self.reply_timeout = reply_timeout
        self.latexmlc = latexmlc
        self.sandbox = sandbox
        self.stop = stop
        self.result_max_bytes = result_max_bytes
        self.disk_mb = disk_mb
        self.max_processes = max_processes
        self.governor = governor if governor is not None else Governor(0)
        self.beat = beat  # asks the heartbeat thread for a heartbeat now
        self.profile_roots = profile_roots
        # profile engine -> the version it reported: shared by the worker's threads, read by its heartbeats
        self.engines = engines if engines is not None else {}
        self.tally = Tally()
        self.dealer: zmq.SyncSocket | None = None
        self.sink: zmq.SyncSocket | None = None

    def run(self) -> None:
        """Ask, convert, answer, until stopped. Only a missing latexmlc ends the loop early (it raises)."""
        no_work_wait = 0.0
        idle = 0  # requests in a row that found no work: a whole round of the services means wait
        self.sink = self._open_sink()
        self.dealer = self._open_dealer()
        try:
            while not self.stop.is_set():
                # Short of memory, the governor holds new tasks back until the machine has room again.
                if not self.governor.wait_clear(self.stop):
                    break
                try:
                    names = list(self.services)
                    if not names:  # nothing to serve yet: wait as after a round without work
                        self.stop.wait(NO_WORK_MAX_WAIT_SECONDS)
                        continue
                    service = names[self.asking % len(names)].encode()
                    self.asking = (self.asking + 1) % len(names)
                    reply = self._ask(service)
                    if reply is None:
                        if self.stop.is_set():
                            break
                        # No answer in time: the dispatcher may have restarted, so ask again on a fresh socket.
                        logger.info(
                            "worker %s: no answer from %s; asking again",
                            self.identity.decode(),
                            self.ventilator_endpoint,
                        )
                        self.dealer.close(linger=0)
                        self.dealer = self._open_dealer()
                        continue
                    task_id, profile, payload = reply
                    if task_id == NO_WORK_TASK_ID:
                        idle += 1
                        if idle >= len(names):
                            idle = 0
                            no_work_wait = min(
                                NO_WORK_MAX_WAIT_SECONDS, max(NO_WORK_FIRST_WAIT_SECONDS, no_work_wait * 2)
                            )
                            self.stop.wait(no_work_wait)
                        continue
                    idle, no_work_wait = 0, 0.0
                    self._serve(service, task_id, profile, payload)
                except engine.EngineMissing:
                    raise
                except Exception:
                    # Whatever went wrong, this worker keeps serving; a stuck socket is replaced.
                    logger.exception("worker %s: unexpected error; reopening its sockets", self.identity.decode())
                    self.stop.wait(1.0)
                    self.dealer.close(linger=0)
                    self.dealer = self._open_dealer()
        finally:
            self.dealer.close(linger=0)
            self.sink.close(linger=SINK_LINGER_MS)

    def _open_dealer(self) -> zmq.SyncSocket:
        dealer = self.context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        # The dispatcher tallies work per worker by this id, and the sink message repeats it.
        dealer.setsockopt(zmq.ROUTING_ID, self.identity)
        dealer.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        dealer.setsockopt(zmq.SNDHWM, SNDHWM)
        dealer.connect(self.ventilator_endpoint)
        return dealer

    def _open_sink(self) -> zmq.SyncSocket:
        sink = self.context.socket(zmq.PUSH)
        sink.setsockopt(zmq.LINGER, SINK_LINGER_MS)
        sink.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        sink.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        sink.setsockopt(zmq.SNDHWM, SNDHWM)
        sink.connect(self.sink_endpoint)
        return sink

    def _ask(self, service: bytes) -> tuple[bytes, bytes, bytes] | None:
        """Send one request for work of `service`, with its profile; return (task_id, profile, payload), or
        None when no complete answer came in time."""
        assert self.dealer is not None
        try:
            self.dealer.send_multipart([service, PROFILE_TAG], zmq.NOBLOCK)
        except zmq.Again:
            self.stop.wait(_SLICE_SECONDS)
            return None
        deadline = time.monotonic() + self.reply_timeout
        frames: list[bytes] = []
        # The payload ends at a frame shorter than message_size; a sender that splits it over several
        # ZeroMQ messages is read on until that frame comes.
        while len(frames) < 3 or not payload_complete(frames[2:], self.message_size):
            if not self._wait_readable(self.dealer, deadline):
                return None
            frames.extend(self.dealer.recv_multipart(zmq.NOBLOCK))
        return frames[0], frames[1], join_frames(frames[2:])

    def _wait_readable(self, sock: zmq.SyncSocket, deadline: float) -> bool:
        while not self.stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if sock.poll(int(min(remaining, _SLICE_SECONDS) * 1000), zmq.POLLIN):
                return True
        return False

    def _serve(self, service: bytes, task_id: bytes, profile: bytes, payload: bytes) -> None:
        label = task_id.decode(errors="replace")
        self.tally.take(label)
        self.beat()
        try:
            run = self._invocation(profile)
            if isinstance(run, bytes):
                result = run
            else:
                self.tally.timeout = run.timeout
                with self.governor.watching() as watch:
                    converted = convert_task(
                        payload, timeout=run.timeout, memory_mb=run.memory_mb, latexmlc=run.executable,
                        cancel=self.stop, sandbox=self.sandbox, result_max_bytes=self.result_max_bytes,
                        disk_mb=self.disk_mb, max_processes=self.max_processes, watch=watch,
                        extra_args=run.options, read_only=run.read_only,
                    )  # fmt: skip
                result = converted.result
                self._count(converted)
        except engine.ConversionCancelled:
            # Stopping: no result, so the lease runs out and the task goes to another worker.
            logger.info("task %s: conversion cancelled by shutdown", label)
            return
        except engine.EngineMissing:
            raise
        except Exception as exc:
            logger.exception("task %s: the worker failed to convert it", label)
            try:
                result = fatal_result("worker", "exception", f"{type(exc).__name__}: {exc}")
            except Exception:
                logger.exception("task %s: cannot build a fatal result either", label)
                result = b""  # a worker that produced nothing sends one empty data frame
        finally:
            self.tally.take(None)
        self._deliver([self.identity, service, task_id, *split_frames(result, self.message_size)], label)
        self.beat()

    def _invocation(self, profile: bytes) -> Invocation | bytes:
        """How this worker runs the profile a task came with (its engine's version known from now on), or
        the Fatal:profile:refused result of a profile it cannot run."""
        try:
            checked = profile_parse(json.loads(profile), roots=self.profile_roots)
            run = invocation(
                checked, roots=self.profile_roots, timeout=self.timeout, memory_mb=self.memory_mb,
                latexmlc=self.latexmlc,
            )  # fmt: skip
        except (ValueError, ProfileInvalid, ProfileRefused) as exc:  # JSONDecodeError and UnicodeError are ValueErrors
            why = str(exc) if isinstance(exc, ProfileInvalid | ProfileRefused) else f"not a profile: {exc}"
            logger.warning("worker %s refuses a profile: %s", self.identity.decode(), why)
            return fatal_result(
                Category.PROFILE, "refused", f"the worker {self.identity.decode()} refuses the profile: {why}"
            )
        if checked.engine not in self.engines:
            self.engines[checked.engine] = engine.engine_version(
                run.executable, sandbox=self.sandbox, read_only=run.read_only
            )
        return run

    def _count(self, converted: Converted) -> None:
        self.tally.conversions += 1
        self.tally.peak_rss = max(self.tally.peak_rss, converted.peak_rss)
        if converted.killed is not None:
            self.tally.kills[converted.killed] = self.tally.kills.get(converted.killed, 0) + 1

    def _deliver(self, frames: list[bytes], label: str) -> None:
        assert self.sink is not None
        warned = False
        while True:
            try:
                self.sink.send_multipart(frames, zmq.NOBLOCK)
                return
            except zmq.Again:
                # The sink is unreachable and the queue is full: wait for it rather than block forever.
                if self.stop.is_set():
                    logger.warning("task %s: result dropped at shutdown, the sink is unreachable", label)
                    return
                if not warned:
                    logger.warning("task %s: the sink is unreachable; waiting to deliver the result", label)
                    warned = True
                self.stop.wait(0.5)


class Heartbeat:
    """The worker's heartbeats: a thread with a DEALER socket of its own (ZeroMQ sockets are not shared
    between threads) that sends a `cortex-heartbeat` message every `interval` seconds and when asked
    (`beat`), naming each worker thread's task and tallies. Never blocks: a heartbeat that cannot be
    queued is dropped, the next one says the same. Whatever comes back on the socket is read and dropped."""

    def __init__(
        self, *, context: zmq.SyncContext, ventilator: str, worker: str, services: list[str], loops: list[_WorkerLoop],
        governor: Governor, interval: float = HEARTBEAT_SECONDS, engines: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.context = context
        self.ventilator = ventilator
        self.worker = worker
        self.services = services
        self.engines = engines if engines is not None else {}
        self.loops = loops
        self.governor = governor
        self.interval = interval
        self._wanted = threading.Event()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cortex-heartbeat", daemon=True)

    def beat(self) -> None:
        self._wanted.set()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._halt.set()
        self._wanted.set()
        self._thread.join()

    def message(self) -> dict[str, object]:
        services = list(self.services)
        return {
            "worker": self.worker,
            "service": services[0] if services else "",
            "services": services,
            # profile engine -> what it said its version is (`latexmlc` from the start, others once used)
            "engines": dict(self.engines),
            "interval": self.interval,
            "threads": {loop.identity.decode(): loop.tally.as_json() for loop in self.loops},
            "governor": {
                "floor": self.governor.floor,
                "available": self.governor.last_available,
                "paused": self.governor.paused,
                "stops": self.governor.stops,
            },
        }

    def _run(self) -> None:
        dealer = self.context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.setsockopt(zmq.SNDHWM, 2)
        dealer.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        dealer.connect(self.ventilator)
        try:
            while not self._halt.is_set():
                self._wanted.clear()
                with contextlib.suppress(zmq.Again):
                    dealer.send_multipart([HEARTBEAT_TAG, heartbeat_encode(self.message())], zmq.NOBLOCK)
                with contextlib.suppress(zmq.Again):
                    while dealer.poll(0, zmq.POLLIN):
                        dealer.recv_multipart(zmq.NOBLOCK)
                self._wanted.wait(self.interval)
        finally:
            dealer.close(linger=0)


def worker_name(identity: str | None) -> str:
    """The worker process's name: `identity`, by default `hostname:pid`."""
    return identity or f"{socket.gethostname()}:{os.getpid()}"


def worker_identities(identity: str | None, concurrency: int) -> list[str]:
    """One identity per thread: the worker's name, with the thread index when there are several."""
    base = worker_name(identity)
    return [base] if concurrency == 1 else [f"{base}:{index}" for index in range(concurrency)]


def run_worker(
    *,
    ventilator: str,
    sink: str,
    service: str | list[str],
    concurrency: int = 1,
    identity: str | None = None,
    timeout: float = engine.DEFAULT_TIMEOUT_SECONDS,
    memory_mb: int = engine.DEFAULT_MEMORY_MB,
    message_size: int = DEFAULT_MESSAGE_SIZE,
    stop: threading.Event | None = None,
    reply_timeout: float = REPLY_TIMEOUT_SECONDS,
    latexmlc: str = "latexmlc",
    sandbox: Sandbox = sandboxes.DEFAULT,
    result_max_bytes: int = RESULT_MAX_BYTES,
    disk_mb: int = engine.DEFAULT_DISK_MB,
    max_processes: int = engine.DEFAULT_MAX_PROCESSES,
    memory_floor_mb: int = 0,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    profile_roots: list[str] | tuple[str, ...] = (),
    serve_changing: bool = False,
) -> None:
    """Serve `service` (a name, or several served in turn; with `serve_changing`, a list its caller changes
    while the worker runs, empty at first if need be) with `concurrency` threads until `stop` is set,
    sending heartbeats, with a memory governor when `memory_floor_mb` is above 0. Profiles' paths must lie
    inside `profile_roots` here. Raises EngineMissing without latexmlc, SandboxUnavailable (before serving
    anything) when the sandbox cannot start and ValueError for a root that cannot be one."""
    # A list given is shared, not copied: its owner may change it while the worker runs.
    services = [service] if isinstance(service, str) else service
    if not all(services) or (not services and not serve_changing):
        raise ValueError("name at least one service to serve")
    roots = tuple(roots_check(list(profile_roots)))
    executable = engine.latexmlc_path(latexmlc)
    engine.sandbox_check(sandbox)
    engines = {ENGINE_DEFAULT: engine.engine_version(executable, sandbox=sandbox)}
    scratch_sweep()  # what workers killed outright left in this temp directory
    if concurrency < 1 or message_size < 1 or reply_timeout <= 0 or result_max_bytes < 1 or heartbeat_seconds <= 0:
        raise ValueError(
            "concurrency, message_size, reply_timeout, result_max_bytes and heartbeat_seconds must be positive"
        )
    governor = Governor(memory_floor_mb)
    stop = stop if stop is not None else threading.Event()
    failures: list[BaseException] = []
    context = zmq.Context()

    def serve(loop: _WorkerLoop) -> None:
        try:
            loop.run()
        except BaseException as exc:
            logger.critical("worker %s stops: %s", loop.identity.decode(), exc)
            failures.append(exc)
            stop.set()

    names = worker_identities(identity, concurrency)
    loops: list[_WorkerLoop] = []
    heartbeat = Heartbeat(
        context=context, ventilator=ventilator, worker=worker_name(identity), services=services, loops=loops,
        governor=governor, interval=heartbeat_seconds, engines=engines,
    )  # fmt: skip
    threads = []
    for index, name in enumerate(names):
        loop = _WorkerLoop(
            context=context, ventilator=ventilator, sink=sink, services=services, identity=name, timeout=timeout,
            memory_mb=memory_mb, message_size=message_size, reply_timeout=reply_timeout, latexmlc=latexmlc,
            sandbox=sandbox, stop=stop, result_max_bytes=result_max_bytes, disk_mb=disk_mb,
            max_processes=max_processes, governor=governor, beat=heartbeat.beat, profile_roots=roots,
            engines=engines,
        )  # fmt: skip
        loops.append(loop)
        threads.append(threading.Thread(target=serve, args=(loop,), name=f"cortex-worker-{index}", daemon=True))
    capped = cgroups.problem()
    logger.info(
        "worker %s: %d thread(s) serving %s from %s, %s, sandbox %s, memory floor %s, processes and memory %s",
        names[0], concurrency, ", ".join(services), ventilator, engines[ENGINE_DEFAULT], sandbox.mode,
        f"{memory_floor_mb} MB" if memory_floor_mb else "off",
        "capped by a cgroup per conversion" if capped is None else f"checked every 50 ms (no cgroup: {capped})",
    )  # fmt: skip
    governor.start()
    heartbeat.start()
    for thread in threads:
        thread.start()
    try:
        # Joined in slices so the main thread stays responsive to signals.
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(_SLICE_SECONDS)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        heartbeat.close()
        governor.close()
        context.term()
    if failures:
        raise failures[0]


def concurrency_arg(text: str) -> int | str:
    """--concurrency: a positive number, or `auto` (conversion.machine.concurrency_auto)."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive number or auto, not {text!r}")
    return value


def stop_on_signals(stop: threading.Event) -> None:
    """Set `stop` on SIGTERM and SIGINT, so running conversions are killed and no latexmlc outlives us."""

    def handle(signum: int, frame: object) -> None:
        logger.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def argument_parser() -> argparse.ArgumentParser:
    """The worker's command line (the Kubernetes manifests' workers are checked against it)."""
    parser = argparse.ArgumentParser(prog="python -m conversion.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--ventilator", required=True, help="e.g. tcp://dispatcher:51695")
    parser.add_argument("--sink", required=True, help="e.g. tcp://dispatcher:51696")
    parser.add_argument(
        "--service", required=True, action="append",
        help="e.g. tex_to_html; repeat it to serve several services, asked for in turn",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=concurrency_arg, default=1,
        help="conversions at once, or auto: one per core, as many as the available memory holds at --memory-mb",
    )  # fmt: skip
    parser.add_argument("--identity", default=None, help="default hostname:pid")
    limits: tuple[tuple[str, type[float] | type[int], float, str], ...] = (
        ("--timeout", float, engine.DEFAULT_TIMEOUT_SECONDS,
         "seconds one conversion may run; past it Fatal:timeout:timedout"),
        ("--memory-mb", int, engine.DEFAULT_MEMORY_MB,
         "the address space one conversion may use, /tmp included (it is on disk); past it Fatal:perl:out_of_memory"),
        ("--disk-mb", int, engine.DEFAULT_DISK_MB,
         "what one conversion may hold on disk, its working directory and /tmp together; past it the conversion"
         " ends with Fatal:limit:disk"),
        ("--max-processes", int, engine.DEFAULT_MAX_PROCESSES,
         "how many processes one conversion may have at once; past it the conversion ends with"
         " Fatal:limit:processes"),
        ("--memory-floor-mb", int, DEFAULT_MEMORY_FLOOR_MB,
         "when the machine has less memory available than this (its cgroup's room counted), the worker stops its"
         " largest conversion, which the dispatcher tries again, and takes no task until memory recovers; 0 turns"
         " this off"),
    )  # fmt: skip
    for flag, kind, default, meaning in limits:
        parser.add_argument(flag, type=kind, default=default, help=f"{meaning} (default {default})")
    parser.add_argument("--message-size", type=int, default=DEFAULT_MESSAGE_SIZE)
    parser.add_argument(
        "--result-max-bytes", type=int, default=RESULT_MAX_BYTES,
        help="a result archive bigger than this is sent as its log with Fatal:invalid:too_large"
        " (keep it at the dispatcher's RESULT_MAX_BYTES; default 64 MiB)",
    )  # fmt: skip
    parser.add_argument(
        "--latexmlc",
        default="latexmlc",
        help="the executable of the engine a profile calls latexmlc (default: on PATH)",
    )
    parser.add_argument(
        "--profile-roots", default=os.environ.get("CONVERSION_PROFILE_ROOTS") or "",
        help="absolute directories separated by ':' that a profile's engine, stylesheets and binding paths must lie"
        " in on this machine (env CONVERSION_PROFILE_ROOTS; default none: only engines on PATH, no paths)",
    )  # fmt: skip
    parser.add_argument(
        "--sandbox", choices=MODES, default=os.environ.get("CONVERSION_SANDBOX") or SandboxMode.BWRAP.value,
        help="bwrap (default; env CONVERSION_SANDBOX) or none: run latexmlc without isolation",
    )  # fmt: skip
    parser.add_argument("--bwrap", default=os.environ.get("CONVERSION_BWRAP") or "bwrap", help="the bwrap executable")
    parser.add_argument(
        "--sandbox-proc", default=os.environ.get("CONVERSION_SANDBOX_PROC") or SandboxProc.MOUNT.value,
        help="mount (default; env CONVERSION_SANDBOX_PROC): the sandbox has a /proc of its own; none: no /proc,"
        " for a container whose masked /proc paths refuse that mount",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point for a worker machine without Django."""
    parser = argument_parser()
    args = parser.parse_args(argv)
    if args.concurrency == "auto":
        args.concurrency = concurrency_auto(args.memory_mb)
    if args.sandbox not in MODES:
        parser.error(f"CONVERSION_SANDBOX must be one of {', '.join(MODES)}, not {args.sandbox!r}")
    if args.sandbox_proc not in PROCS:
        parser.error(f"CONVERSION_SANDBOX_PROC must be one of {', '.join(PROCS)}, not {args.sandbox_proc!r}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(message)s")
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        run_worker(
            ventilator=args.ventilator, sink=args.sink, service=args.service, concurrency=args.concurrency,
            identity=args.identity, timeout=args.timeout, memory_mb=args.memory_mb, message_size=args.message_size,
            stop=stop, latexmlc=args.latexmlc,
            sandbox=Sandbox(mode=args.sandbox, bwrap=args.bwrap, proc=args.sandbox_proc),
            result_max_bytes=args.result_max_bytes, disk_mb=args.disk_mb, max_processes=args.max_processes,
            memory_floor_mb=args.memory_floor_mb,
            profile_roots=[root for root in args.profile_roots.split(":") if root],
        )  # fmt: skip
    except (engine.EngineMissing, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
