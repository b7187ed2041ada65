"""The warm engine of `/convert`: LaTeXML loaded once per server, one fork per conversion.

A server (WarmServer) is a Perl process, `warm_server.pl`, alone in a bubblewrap sandbox of its own: it
loads LaTeXML, prepares the session of one profile (latexmlc's options for one format and whatsin/whatsout)
with TeX.pool and LaTeX.pool, and then forks a child for each conversion. A conversion therefore starts
from the state the parent prepared, and nothing it defines, counts or writes reaches the next one: its
process ends, its files (the sandbox's /work and /tmp) are removed, and a server that still holds a process
of it afterwards is ended and started again. The parent reads no TeX.

The limits are those of a cold conversion (conversion.engine): the sandbox's first process gets the
address-space and file-size limits, which every child inherits; a cgroup of the server's own, where one
can be made, caps its processes and memory; the conversion's wall-clock time, disk and processes are
watched from here and a conversion past one is killed with the same fatal message a cold one gets.

A pool (WarmPool) is a few servers of one profile; the engine (WarmEngine) keeps a pool per profile in
use, starts a server again when its process dies, and answers over a Unix socket (`serving`, `request`),
so that every web process of the machine shares the same servers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import queue
import re
import resource
import select
import shutil
import signal
import socket
import socketserver
import stat
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypedDict

from conversion import cgroups, imagemagick
from conversion import sandbox as sandboxes
from conversion.choices import Chunk, KillReason, OutputFormat
from conversion.engine import (
    LATEXMLC_NICENESS,
    LIMIT_CHECK_SECONDS,
    LOG_NAME,
    TEXT_INPUT_NAME,
    Limits,
    Run,
    TextAnswer,
    _disk_used,
    _process_tree,
    _read_log,
    finish_log,
    latexmlc_timeout,
    read_regular_file,
    text_answer,
    text_options,
    text_result_name,
)
from conversion.processes import die_with_parent, scratch_prefix, scratch_sweep
from conversion.sandbox import SANDBOX_GID, SANDBOX_UID, Sandbox

logger = logging.getLogger(__name__)

SERVER_SCRIPT = Path(__file__).with_name("warm_server.pl")
PERL = "/usr/bin/perl"
# How long a server may take to load LaTeXML and prepare its session (about 1 s on a quiet machine).
START_SECONDS = 120.0
# How long the parent may take to fork and say "started", and to say "exited" once its child is killed.
ANSWER_SECONDS = 10.0
# The parent's own share of its cgroup's memory, beyond a conversion's budget: LaTeXML loaded is ~150 MB.
PARENT_MEMORY_MB = 512
_STDERR_NAME = ".warm-stderr"
FORK_FAILED_EXIT_CODE = 1
# How many recent conversion times a pool keeps for its percentiles.
_RECENT = 200
# A restarted server waits this long after a failed start before it tries again, doubling up to the maximum.
RESTART_PAUSE_SECONDS = 1.0
# How long stopping a pool waits for a server being started to end (it is killed, then removes its files).
STOP_STARTING_SECONDS = 10.0
RESTART_PAUSE_MAX_SECONDS = 60.0
# One request or answer on the engine's socket: a JSON object on one line, at most this long.
MESSAGE_MAX_BYTES = 64 * 1024 * 1024
# A paper's main file as convert_directory takes it and the server's `convert SECONDS SOURCE` line carries
# it (warm_server.pl checks the same): a relative path of plain names, none starting with `.` or `-`.
_SOURCE_NAME = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_+][A-Za-z0-9_.+-]*)*")
SOURCE_MAX_CHARS = 255


def _launcher() -> queue.SimpleQueue[Callable[[], None]]:
    """The queue of the one thread that starts every server of this process. It never ends, because a
    server dies with the thread that started it (bwrap's --die-with-parent and the parent-death signal are
    bound to the starting thread, not the process)."""
    global _launch_queue
    with _launcher_lock:
        if _launch_queue is None:
            _launch_queue = queue.SimpleQueue()
            threading.Thread(target=_launch_loop, args=(_launch_queue,), name="warm-launcher", daemon=True).start()
        return _launch_queue


def _launch_loop(jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        job = jobs.get()
        try:
            job()
        except Exception:
            logger.exception("starting a warm server failed")


_launch_queue: queue.SimpleQueue[Callable[[], None]] | None = None
_launcher_lock = threading.Lock()


class WarmUnavailable(RuntimeError):
    """The warm engine cannot serve this request (not running, no server of its profile ready, its server
    ended): the caller converts it cold."""


class WarmBusy(WarmUnavailable):
    """Every server of the profile's pool is converting, and the wait for one would outlast the caller's:
    the pool is at its capacity, as /convert's slots are when every one is held."""


class ServerFailed(RuntimeError):
    """A server could not start, or its parent ended."""


@dataclass(frozen=True)
class Profile:
    """What a server is prepared for: latexmlc's options for TeX given as text (conversion.engine.text_options)."""

    format: str = OutputFormat.HTML5.value
    whatsin: str = Chunk.DOCUMENT.value
    whatsout: str = Chunk.DOCUMENT.value
    includestyles: bool = False
    pmml: bool = False
    cmml: bool = False

    def __post_init__(self) -> None:
        text_options(**asdict(self))  # ValueError for an unknown value

    @property
    def name(self) -> str:
        """`format:whatsin:whatsout` and its switches, as the configuration and the metrics write it."""
        switches = [name for name in ("includestyles", "pmml", "cmml") if getattr(self, name)]
        return ":".join([self.format, self.whatsin, self.whatsout, *switches])

    @classmethod
    def parse(cls, text: str) -> Profile:
        """The profile a name (`html5:math:math:pmml`) stands for; ValueError when it stands for none."""
        parts = [part.strip() for part in text.strip().split(":")]
        if len(parts) < 3:
            raise ValueError(f"a warm profile is format:whatsin:whatsout[:pmml][:cmml][:includestyles], not {text!r}")
        switches = set(parts[3:])
        unknown = switches - {"includestyles", "pmml", "cmml"}
        if unknown:
            raise ValueError(f"unknown switch {sorted(unknown)[0]!r} in warm profile {text!r}")
        return cls(parts[0], parts[1], parts[2], "includestyles" in switches, "pmml" in switches, "cmml" in switches)

    def options(self, timeout: float) -> list[str]:
        """latexmlc's options for this profile, as convert_text gives them, but for the source."""
        options = text_options(**asdict(self))
        return [
            *options[:3],
            f"--dest={sandboxes.INSIDE_WORK / text_result_name(self.format)}",
            f"--log={LOG_NAME}",
            f"--timeout={latexmlc_timeout(timeout)}",
            *options[3:],
        ]


def parse_pools(text: str) -> dict[Profile, int]:
    """`profile=N, ...` (CONVERT_WARM_POOLS) as {profile: servers}; ValueError for a bad entry."""
    pools: dict[Profile, int] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, _, size = entry.partition("=")
        try:
            servers = int(size) if size.strip() else 1
        except ValueError:
            raise ValueError(f"the size of warm pool {name!r} must be a number, not {size!r}") from None
        if servers < 1:
            raise ValueError(f"warm pool {name!r} needs at least one server")
        pools[Profile.parse(name)] = servers
    return pools


def source_name_check(main_file: str) -> str:
    """`main_file` when it is a main file convert_directory takes (see _SOURCE_NAME); ValueError otherwise."""
    if len(main_file) > SOURCE_MAX_CHARS or not _SOURCE_NAME.fullmatch(main_file):
        raise ValueError(f"a warm server converts a relative path of plain names, not {main_file[:300]!r}")
    return main_file


@dataclass(frozen=True)
class DirectoryConversion:
    """One conversion of a directory's main file by a server (convert_directory)."""

    log: bytes  # as engine.Conversion's: the log with the runtime (and a kill's lines) appended
    status_code: int | None
    runtime_ms: int
    timed_out: bool
    killed: str | None
    result: bytes  # the destination's content (b"" when none was written)
    cpu_ms: int | None = None  # the CPU time of its processes, from the server's cgroup (None without one)


@dataclass
class _Session:
    """A started server, from its parent's start until it stops: the parent and its pipes, the sandbox's first
    process, the working directory and /tmp each conversion uses, and the server's cgroup (None without one)."""

    process: subprocess.Popen[bytes]
    stdin: IO[bytes]
    stdout: IO[bytes]
    work: Path
    tmp: Path
    quota: cgroups.Quota | None
    first: int | None = None  # host pid of the sandbox's first process
    init_log: bytes = b""  # the preparation's log, with which each conversion's log begins (as latexmlc's does)
    lines: bytes = b""  # what the parent said past its last whole line
    # The cgroup's OOM kills and refused forks when the running conversion began: its counts are the
    # server's whole life's, and only what one conversion adds to them is that conversion's doing.
    counts_before: tuple[int, int] = (0, 0)

    def send(self, line: str) -> None:
        try:
            self.stdin.write(line.encode() + b"\n")
            self.stdin.flush()
        except (OSError, ValueError) as exc:
            raise ServerFailed(f"the warm server's parent ended ({exc})") from None

    def read_line(self, deadline: float, *, allow_timeout: bool = False) -> str | None:
        """The parent's next line, waiting until `deadline`; None at the deadline when `allow_timeout`, else
        ServerFailed (also when the parent ended)."""
        fd = self.stdout.fileno()
        while b"\n" not in self.lines:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if allow_timeout:
                    return None
                raise ServerFailed("the warm server did not answer in time")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ServerFailed(f"the warm server's parent ended (exit code {self.process.wait()})")
            self.lines += chunk
        line, _, self.lines = self.lines.partition(b"\n")
        return line.decode(errors="replace").strip()

    def quota_counts(self) -> tuple[int, int]:
        """The server's cgroup's OOM kills and refused forks so far ((0, 0) without a cgroup)."""
        if self.quota is None:
            return 0, 0
        return self.quota.oom_kills(), self.quota.refused_forks()

    def cpu_usec(self) -> int | None:
        """The CPU time the server's processes used so far (the parent waits meanwhile: a conversion's own)."""
        with contextlib.suppress(OSError, ValueError):
            return self.quota.cpu_usec() if self.quota is not None else None
        return None

    def wipe(self) -> None:
        for directory in (self.work, self.tmp):
            for entry in list(directory.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, onerror=_writable_and_retry)
                else:
                    entry.unlink()


class WarmServer:
    """One sandboxed Perl parent prepared for one profile, converting one input at a time. A server made
    with for_options is prepared with latexmlc's options as given instead (a worker's, to measure what a
    warm start gains it)."""

    def __init__(self, profile: Profile | None, *, limits: Limits, sandbox: Sandbox = sandboxes.DEFAULT) -> None:
        self.profile = profile
        self.limits = limits
        self.sandbox = sandbox
        self.name = profile.name if profile is not None else ""
        self._options: tuple[str, ...] = ()  # latexmlc's options without a profile (for_options')
        # The destination, relative to the working directory (without a profile, `.`: none until for_options
        # names one).
        self._destination = PurePosixPath(text_result_name(profile.format) if profile is not None else "")
        self._read_only: tuple[Path, ...] = ()
        self.broken: str | None = None  # why it must be started again
        self.busy_since: float | None = None  # when its pool handed it a conversion (monotonic), until released
        self.served = 0
        self._stack: contextlib.ExitStack | None = None
        self._session: _Session | None = None

    @classmethod
    def for_options(
        cls, options: Sequence[str], *, limits: Limits, sandbox: Sandbox = sandboxes.DEFAULT,
        read_only: Sequence[Path] = (),
    ) -> WarmServer:  # fmt: skip
        """A server prepared with latexmlc's `options` (all but the source), whose `--dest=` must name a file
        inside the sandbox's /work; `read_only` are host paths the options need (profiles.Invocation's).
        ValueError without such a destination."""
        server = cls(None, limits=limits, sandbox=sandbox)
        destinations = [option.removeprefix("--dest=") for option in options if option.startswith("--dest=")]
        inside = PurePosixPath(destinations[-1]) if destinations else None
        if (
            inside is None
            or inside == sandboxes.INSIDE_WORK
            or not inside.is_relative_to(sandboxes.INSIDE_WORK)
            or ".." in inside.parts
        ):
            raise ValueError(f"the options' --dest must name a file inside {sandboxes.INSIDE_WORK}")
        server._destination = inside.relative_to(sandboxes.INSIDE_WORK)
        server._options = tuple(options)
        server._read_only = tuple(read_only)
        server.name = " ".join(options)
        return server

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server's parent (bwrap's, when sandboxed), from its start until the server stops."""
        return self._session.process if self._session is not None else None

    @property
    def first(self) -> int | None:
        """The host pid of the sandbox's first process (the parent's without a sandbox), once it is known."""
        return self._session.first if self._session is not None else None

    # -- life --------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the sandbox and its parent and wait until its session is prepared; ServerFailed if it is not."""
        self.stop()
        stack = contextlib.ExitStack()
        try:
            self._start(stack)
        except BaseException:
            stack.close()
            raise
        self._stack = stack

    def _start(self, stack: contextlib.ExitStack) -> None:
        limits = self.limits
        scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix("cortex-warm-")))
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        os.chmod(scratch, 0o711)  # noqa: S103 - passable, not listable: the sandbox user reaches work/ through it
        work = scratch / "work"
        work.mkdir()
        policy = imagemagick.policy_xml(memory_mb=limits.memory_mb, disk_mb=limits.disk_mb, timeout=limits.timeout)
        launch = stack.enter_context(
            sandboxes.launched(
                self.sandbox, work, str(SERVER_SCRIPT), read_only=self._read_only, imagemagick_policy=policy
            )
        )
        work = Path(launch.cwd)
        if self.sandbox.enabled:
            tmp = Path(launch.written[1])
        else:
            tmp = scratch / "tmp"
            tmp.mkdir()
        memory = limits.memory_mb * 1024 * 1024
        disk = limits.disk_mb * 1024 * 1024
        quota = stack.enter_context(
            cgroups.quota(
                # Room for the resident processes and for bwrap itself, which stays in the group as their parent.
                max_processes=limits.max_processes + self._resident + (1 if self.sandbox.enabled else 0),
                memory_bytes=(limits.memory_mb + PARENT_MEMORY_MB) * 1024 * 1024,
            )
        )
        join = quota.join_fds() if quota is not None else []

        def limit_and_join() -> None:
            # Between fork and exec; everything in the sandbox inherits these.
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
            os.nice(LATEXMLC_NICENESS)
            die_with_parent(signal.SIGKILL)
            cgroups.Quota.join(join)

        stderr = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - closed with the server
        env = launch.env
        if not self.sandbox.enabled:
            env = {**os.environ, "TMPDIR": str(tmp), "HOME": str(tmp)}
        latexmlc_options = self.profile.options(limits.timeout) if self.profile is not None else self._options
        argv = [*launch.argv_prefix, PERL, launch.executable, *latexmlc_options]
        if not self.sandbox.enabled:  # no /work: the destination is the working directory's own
            argv = [part.replace(f"--dest={sandboxes.INSIDE_WORK}", f"--dest={work}") for part in argv]
        options = launch.popen_options()
        options["env"] = env
        try:
            process = subprocess.Popen(
                argv, **options, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                start_new_session=True, preexec_fn=limit_and_join,
            )  # fmt: skip
        finally:
            for fd in join:
                os.close(fd)
        assert process.stdin is not None and process.stdout is not None  # both are pipes
        self._session = session = _Session(process, process.stdin, process.stdout, work, tmp, quota)
        launch.started()
        stack.callback(self._end)
        session.first = launch.first_process(timeout=START_SECONDS) if self.sandbox.enabled else process.pid
        said = session.read_line(time.monotonic() + START_SECONDS)
        if said != "ready":
            stderr.seek(0)
            tail = stderr.read()[-2000:].decode(errors="replace").strip().splitlines()
            why = said or (tail[-1] if tail else f"it exited with code {process.poll()}")
            raise ServerFailed(f"the warm server for {self.name} did not start: {why}")
        session.init_log = read_regular_file(work / LOG_NAME)
        session.wipe()
        self.broken = None
        self.served = 0

    def _end(self) -> None:
        session = self._session
        if session is None:
            return
        process = session.process
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        if session.first is not None and session.first != process.pid:
            with contextlib.suppress(OSError):
                os.kill(session.first, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        for pipe in (session.stdin, session.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        self._session = None

    def stop(self) -> None:
        """End the server and remove its files (nothing happens when it is not running)."""
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()

    def abort_start(self) -> None:
        """Cut short a start in progress on the launcher's thread: its parent is killed, so start() raises
        ServerFailed and removes what it made."""
        process = self.process
        if process is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)

    def alive(self) -> bool:
        return self._session is not None and self._session.process.poll() is None and self.broken is None

    def _running(self) -> _Session:
        """The session of a live server; ServerFailed when the server is not alive."""
        session = self._session
        if session is None or not self.alive():
            raise ServerFailed(self.broken or "the warm server is not running")
        return session

    # -- one conversion ----------------------------------------------------------------------------------

    def convert(self, tex: str, *, timeout: float) -> TextAnswer:
        """Convert `tex` (a `literal:` prefix is dropped) within `timeout` seconds: the answer of
        conversion.engine.convert_text. ServerFailed when the parent ended (the server is then broken)."""
        session = self._running()
        (session.work / TEXT_INPUT_NAME).write_text(tex.removeprefix("literal:"), encoding="utf-8")
        self._give(session.work / TEXT_INPUT_NAME)
        done = self._converted(session, None, timeout)
        return text_answer(done.result, done.log, done.status_code)

    def convert_directory(self, source_dir: Path, main_file: str, *, timeout: float) -> DirectoryConversion:
        """Convert `main_file` (relative to `source_dir`) within `timeout` seconds, with every file of
        `source_dir` copied into the working directory first (links as links), as latexmlc run there on
        `./main_file` with the server's options would. ValueError for a main file source_name_check
        refuses, ServerFailed when the parent ended (the server is then broken)."""
        source_name_check(main_file)
        session = self._running()
        try:
            shutil.copytree(source_dir, session.work, symlinks=True, dirs_exist_ok=True)
            self._give(session.work)
        except BaseException:
            session.wipe()  # the next conversion starts from an empty directory
            raise
        return self._converted(session, main_file, timeout)

    def _give(self, path: Path) -> None:
        """Hand `path` (and all below it) to the sandbox user, when we are root and sandboxed."""
        if os.geteuid() == 0 and self.sandbox.enabled:
            sandboxes._chown_tree(path, SANDBOX_UID, SANDBOX_GID)

    def _converted(self, session: _Session, main_file: str | None, timeout: float) -> DirectoryConversion:
        """One conversion of the input in the working directory (`./main_file`, `input.tex` when None)."""
        limits = Limits(min(timeout, self.limits.timeout), self.limits.memory_mb, self.limits.disk_mb,
                        self.limits.max_processes)  # fmt: skip
        work = session.work
        (work / LOG_NAME).write_bytes(session.init_log)
        self._give(work / LOG_NAME)
        cpu_before = session.cpu_usec()
        started = time.monotonic()
        session.counts_before = session.quota_counts()
        try:
            session.send(" ".join(["convert", str(latexmlc_timeout(limits.timeout)), *filter(None, [main_file])]))
            if session.read_line(started + ANSWER_SECONDS) != "started":
                raise ServerFailed("the warm server did not start the conversion")
            wait_status, passed, timed_out = self._watch(session, started + limits.timeout, limits)
        except ServerFailed as exc:
            self.broken = str(exc)
            raise
        runtime_ms = int((time.monotonic() - started) * 1000)
        stderr = read_regular_file(session.tmp / _STDERR_NAME)[-256 * 1024 :]
        # The parent says -1 when it could not fork: that reads as a process that exited with an error.
        returncode = os.waitstatus_to_exitcode(wait_status) if wait_status >= 0 else FORK_FAILED_EXIT_CODE
        run = Run(returncode=returncode, timed_out=timed_out, runtime_ms=runtime_ms, stderr=stderr, limit=passed)
        log, status_code, killed = finish_log(_read_log(work / LOG_NAME), run, limits)
        result = _read_below(work, self._destination)
        cpu_after = session.cpu_usec()
        cpu_ms = (cpu_after - cpu_before) // 1000 if cpu_before is not None and cpu_after is not None else None
        self.served += 1
        self._after(session)
        return DirectoryConversion(log, status_code, runtime_ms, timed_out, killed, result, cpu_ms)

    def _watch(self, session: _Session, deadline: float, limits: Limits) -> tuple[int, str | None, bool]:
        """Wait for the child's end, killing it at the deadline or past a limit: (its wait status, the
        limit passed or None, whether it timed out)."""
        disk_limit = limits.disk_mb * 1024 * 1024
        passed: str | None = None
        timed_out = False
        while True:
            now = time.monotonic()
            line = session.read_line(min(deadline, now + LIMIT_CHECK_SECONDS), allow_timeout=True)
            if line is not None:
                break
            if time.monotonic() >= deadline:
                timed_out = True
            elif (counts := session.quota_counts())[0] > session.counts_before[0]:
                passed = KillReason.MEMORY
            elif _disk_used((session.work, session.tmp)) > disk_limit:
                passed = KillReason.DISK
            elif (
                self._conversion_processes(limits.max_processes + 1) > limits.max_processes
                or counts[1] > session.counts_before[1]
            ):
                passed = KillReason.PROCESSES
            if timed_out or passed:
                self._kill_conversion()
                line = session.read_line(time.monotonic() + ANSWER_SECONDS)
                break
        verb, _, value = (line or "").partition(" ")
        if verb != "exited":
            raise ServerFailed(f"the warm server said {line!r} instead of the conversion's end")
        return int(value), passed, timed_out

    def _after(self, session: _Session) -> None:
        """Leave nothing of the conversion: its processes are gone (else the server is started again) and
        its files are removed."""
        if self._conversion_processes(1) > 0:
            self._kill_conversion()
            self.broken = "a process of the last conversion outlived it"
        if session.quota_counts()[0] > session.counts_before[0]:
            self.broken = "its cgroup's memory limit ended one of its processes"
        try:
            session.wipe()
        except OSError as exc:
            self.broken = f"the last conversion's files could not be removed: {exc}"

    @property
    def _resident(self) -> int:
        """How many processes the server has between conversions: the sandbox's first (bwrap's init) and
        the parent; without a sandbox, the parent alone."""
        return 2 if self.sandbox.enabled else 1

    def _conversion_processes(self, stop_above: int) -> int:
        """How many processes of the server are the conversion's (all but the resident ones)."""
        if self.first is None:
            return 0
        count, _, _ = _process_tree(self.first, stop_above=stop_above + self._resident)
        return max(0, count - self._resident)

    def _parent_pid(self) -> int | None:
        if self.first is None:
            return None
        if not self.sandbox.enabled:
            return self.first
        with contextlib.suppress(OSError, ValueError):
            children = Path(f"/proc/{self.first}/task/{self.first}/children").read_text().split()
            return int(children[0]) if children else None
        return None

    def _kill_conversion(self) -> None:
        """SIGKILL every process of the sandbox but its first and the parent, until none is left."""
        parent = self._parent_pid()
        resident = {self.first, parent}
        end = time.monotonic() + ANSWER_SECONDS
        while time.monotonic() < end:
            found = [pid for pid in _tree_pids(self.first) if pid not in resident]
            if not found:
                return
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        self.broken = "the last conversion's processes could not be killed"


def _read_below(root: Path, relative: PurePosixPath) -> bytes:
    """The regular file at `relative` below `root`, opened one part at a time without following a link (the
    run may have put one anywhere on the way); nothing when it is missing, a link or not a regular file."""
    opened: list[int] = []
    try:
        opened.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
        for part in relative.parts[:-1]:
            opened.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=opened[-1]))
        opened.append(os.open(relative.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=opened[-1]))
        with open(opened.pop(), "rb") as handle:
            return handle.read() if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) else b""
    except OSError:
        return b""
    finally:
        for fd in opened:
            os.close(fd)


def _writable_and_retry(function: Callable[[str], object], path: str, _excinfo: object) -> None:
    """rmtree's error handler (onerror): a conversion may leave directories without write permission."""
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700)
    function(path)


def _tree_pids(pid: int | None) -> list[int]:
    """`pid` and every process below it (from /proc's children lists)."""
    if pid is None:
        return []
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for thread in os.listdir(f"/proc/{current}/task"):
                with contextlib.suppress(OSError, ValueError):
                    pending.extend(
                        int(child) for child in Path(f"/proc/{current}/task/{thread}/children").read_text().split()
                    )
    return found


@dataclass
class PoolStats:
    served: int = 0
    failed: int = 0  # conversions whose server ended during them
    restarts: int = 0
    last_error: str | None = None
    recent_ms: deque[float] = field(default_factory=lambda: deque(maxlen=_RECENT))


class PoolStatus(TypedDict):
    """A pool's state, as WarmPool.status gives it and the engine's socket answers `status` with."""

    profile: str
    servers: int
    ready: int
    busy: int
    starting: int
    served: int
    failed: int
    restarts: int
    last_error: str | None
    p50_ms: float | None
    p95_ms: float | None
    pids: list[int]


class WarmPool:
    """The servers of one profile: each converts one input at a time; a dead or broken one is started again."""

    def __init__(self, profile: Profile, size: int, *, limits: Limits, sandbox: Sandbox = sandboxes.DEFAULT) -> None:
        self.profile = profile
        self.size = size
        self.servers = [WarmServer(profile, limits=limits, sandbox=sandbox) for _ in range(size)]
        self.stats = PoolStats()
        self.last_used = time.monotonic()
        self._idle: deque[WarmServer] = deque()
        self._starting: set[int] = set()
        self._waiting = 0  # requests in acquire()
        self._cond = threading.Condition()
        self._closed = False

    def start(self) -> None:
        """Start every server, each in a thread of its own; they join the idle ones as they become ready."""
        for server in self.servers:
            self._restart(server, first=True)

    def _restart(self, server: WarmServer, *, first: bool = False) -> None:
        with self._cond:
            if self._closed or id(server) in self._starting:
                return
            self._starting.add(id(server))
            if not first:
                self.stats.restarts += 1
        _launcher().put(lambda: self._start_one(server, RESTART_PAUSE_SECONDS))

    def _start_one(self, server: WarmServer, pause: float) -> None:
        """One attempt to start `server` (on the launcher's thread); after a failure, another in `pause` s."""
        with self._cond:
            if self._closed:  # stopped while this start waited its turn
                self._starting.discard(id(server))
                self._cond.notify_all()
                return
        try:
            server.start()
        except (ServerFailed, OSError) as exc:
            logger.warning("warm server for %s: %s", self.profile.name, exc)
            with self._cond:
                self.stats.last_error = str(exc)
                closed = self._closed
            if not closed:
                later = min(pause * 2, RESTART_PAUSE_MAX_SECONDS)
                timer = threading.Timer(pause, lambda: _launcher().put(lambda: self._start_one(server, later)))
                timer.daemon = True
                timer.start()
                return
        with self._cond:
            self._starting.discard(id(server))
            self._cond.notify_all()
            if self._closed:
                server.stop()
                return
            if server.alive():
                self._idle.append(server)
                self._cond.notify()

    def acquire(self, deadline: float) -> WarmServer | None:
        """An idle live server, waiting until `deadline` for one; None when none came, and at once when the
        wait would outlast the deadline: while its servers are busy, the pool's recent median conversion
        time, times the requests waiting before this one and itself, over its live servers (a formula's
        queue waits a few tenths of a second; behind long conversions a request goes elsewhere at once)."""
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    while self._idle:
                        server = self._idle.popleft()
                        if server.alive():
                            server.busy_since = time.monotonic()
                            return server
                        self._restart_locked(server)
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._closed or not self._any_ready_or_starting():
                        return None
                    if self._expected_wait() > remaining:
                        return None
                    self._cond.wait(remaining)
            finally:
                self._waiting -= 1

    def _expected_wait(self) -> float:
        """Seconds until a server is free for the latest waiter: a conversion's time, the larger of the
        pool's recent median and how long the busy conversion that started last has run so far, times the
        waiters over the live servers (0 while a server is starting)."""
        live = sum(1 for server in self.servers if server.alive())
        if self._starting or not live:
            return 0.0
        recent = sorted(self.stats.recent_ms)
        typical = recent[len(recent) // 2] / 1000 if recent else 0.0
        now = time.monotonic()
        running = [now - server.busy_since for server in self.servers if server.busy_since is not None]
        if running:
            typical = max(typical, min(running))
        return typical * self._waiting / live

    def _any_ready_or_starting(self) -> bool:
        return bool(self._starting) or any(server.alive() for server in self.servers)

    def _restart_locked(self, server: WarmServer) -> None:
        self._cond.release()
        try:
            self._restart(server)
        finally:
            self._cond.acquire()

    def release(self, server: WarmServer, *, elapsed_ms: float | None, failed: bool = False) -> None:
        with self._cond:
            self.last_used = time.monotonic()
            server.busy_since = None
            if elapsed_ms is not None:
                self.stats.served += 1
                self.stats.recent_ms.append(elapsed_ms)
            if failed:
                self.stats.failed += 1
            if server.alive():
                self._idle.append(server)
                self._cond.notify()
                return
            self.stats.last_error = server.broken or self.stats.last_error
        self._restart(server)

    def watch(self) -> None:
        """Start again every idle server whose parent died meanwhile (called now and then by the engine)."""
        with self._cond:
            dead = [server for server in self._idle if not server.alive()]
            for server in dead:
                self._idle.remove(server)
        for server in dead:
            self.stats.last_error = server.broken or "its parent ended"
            self._restart(server)

    def ready(self) -> bool:
        with self._cond:
            return bool(self._idle) or any(server.alive() for server in self.servers)

    def status(self) -> PoolStatus:
        with self._cond:
            recent = sorted(self.stats.recent_ms)
            # Ready: prepared and running (a starting server's process runs while it prepares); busy: ready and
            # not idle (an idle server may have died since, until watch() sees it).
            ready = [server for server in self.servers if server.alive() and id(server) not in self._starting]
            idle = {id(server) for server in self._idle}
            return {
                "profile": self.profile.name,
                "servers": self.size,
                "ready": len(ready),
                "busy": sum(1 for server in ready if id(server) not in idle),
                "starting": len(self._starting),
                "served": self.stats.served,
                "failed": self.stats.failed,
                "restarts": self.stats.restarts,
                "last_error": self.stats.last_error,
                "p50_ms": _percentile(recent, 0.5),
                "p95_ms": _percentile(recent, 0.95),
                "pids": [server.process.pid for server in self.servers if server.process is not None],
            }

    def stop(self) -> None:
        """Stop every server; one being started is cut short and waited for (STOP_STARTING_SECONDS at most),
        so that none is left running or holding its files when the process ends."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        deadline = time.monotonic() + STOP_STARTING_SECONDS
        while True:
            with self._cond:
                starting = [server for server in self.servers if id(server) in self._starting]
                if not starting or time.monotonic() >= deadline:
                    break
            for server in starting:
                server.abort_start()
            with self._cond:
                self._cond.wait(0.1)
        for server in self.servers:
            server.stop()


def _percentile(ordered: list[float], fraction: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)], 1)


class WarmEngine:
    """A pool per profile in use: the configured ones from the start, others started at their first request
    (which waits for it, as long as the caller lets it), at most `max_pools` at once (the least recently
    used pool that is not configured stops to make room)."""

    def __init__(
        self,
        pools: dict[Profile, int],
        *,
        limits: Limits,
        sandbox: Sandbox = sandboxes.DEFAULT,
        on_demand_size: int = 1,
        max_pools: int = 6,
    ) -> None:
        self.limits = limits
        self.sandbox = sandbox
        self.on_demand_size = on_demand_size
        self.max_pools = max(max_pools, len(pools))
        self.pools: dict[Profile, WarmPool] = {}
        self._lock = threading.Lock()
        self._configured = dict(pools)
        self._stop = threading.Event()

    def start(self) -> None:
        scratch_sweep()  # the servers' directories an engine killed outright left
        for profile, size in self._configured.items():
            self._pool(profile, size)
        threading.Thread(target=self._watch, name="warm-watch", daemon=True).start()

    def _pool(self, profile: Profile, size: int) -> WarmPool:
        with self._lock:
            pool = self.pools.get(profile)
            if pool is not None:
                return pool
            if len(self.pools) >= self.max_pools:
                self._evict_locked()
            pool = WarmPool(profile, size, limits=self.limits, sandbox=self.sandbox)
            self.pools[profile] = pool
        pool.start()
        return pool

    def _evict_locked(self) -> None:
        candidates = [pool for profile, pool in self.pools.items() if profile not in self._configured]
        if not candidates:
            return
        oldest = min(candidates, key=lambda pool: pool.last_used)
        del self.pools[oldest.profile]
        threading.Thread(target=oldest.stop, daemon=True).start()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                pools = list(self.pools.values())
            for pool in pools:
                pool.watch()

    def convert(
        self, profile: Profile, tex: str, *, timeout: float, wait: float, limits: Mapping[str, object] | None = None
    ) -> TextAnswer:
        """The answer of a warm conversion, waiting up to `wait` seconds for a free server of the profile;
        WarmUnavailable when there is none (its pool is starting, or all its servers failed), or when the
        caller's `limits` (memory_mb, disk_mb, max_processes) are not those its servers run under: they are
        set when a server starts, and a conversion under other limits is the caller's to run cold."""
        if limits is not None:
            own = {"memory_mb": self.limits.memory_mb, "disk_mb": self.limits.disk_mb,
                   "max_processes": self.limits.max_processes}  # fmt: skip
            if {name: limits.get(name) for name in own} != own:
                raise WarmUnavailable(f"the warm engine's servers run under other limits ({own}) than asked")
        pool = self.pools.get(profile) or self._pool(profile, self._configured.get(profile, self.on_demand_size))
        server = pool.acquire(time.monotonic() + wait)
        if server is None:
            status = pool.status()
            if status["starting"] and not status["ready"]:
                raise WarmUnavailable(f"the warm pool {profile.name} is starting")
            if status["ready"]:
                raise WarmBusy(f"the warm pool {profile.name} has no free server")
            raise WarmUnavailable(f"the warm pool {profile.name} has no live server")
        started = time.monotonic()
        try:
            answer = server.convert(tex, timeout=timeout)
        except ServerFailed as exc:
            pool.release(server, elapsed_ms=None, failed=True)
            raise WarmUnavailable(f"the warm server for {profile.name} ended during the conversion: {exc}") from None
        except BaseException:
            server.broken = server.broken or "a conversion failed in the engine"
            pool.release(server, elapsed_ms=None, failed=True)
            raise
        pool.release(server, elapsed_ms=(time.monotonic() - started) * 1000)
        return answer

    def status(self) -> list[PoolStatus]:
        with self._lock:
            pools = list(self.pools.values())
        return [pool.status() for pool in pools]

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            pools = list(self.pools.values())
            self.pools.clear()
        for pool in pools:
            pool.stop()


# -- the engine's socket ----------------------------------------------------------------------------------


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        engine: WarmEngine = self.server.engine  # type: ignore[attr-defined]
        line = self.rfile.readline(MESSAGE_MAX_BYTES + 1)
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("a request is a JSON object")
            if message.get("op") == "status":
                answer: Mapping[str, object] = {"pools": engine.status()}
            elif message.get("op") == "convert":
                profile = Profile(**message["profile"])
                tex, timeout = message["tex"], float(message["timeout"])
                if not isinstance(tex, str) or math.isnan(timeout) or timeout <= 0:
                    # Refused here: past this point a failure marks the server that took it as broken.
                    raise ValueError("tex must be a string and timeout a positive number of seconds")
                limits = message.get("limits")
                if limits is not None and not isinstance(limits, dict):
                    raise ValueError("limits must be an object")
                answer = engine.convert(
                    profile, tex, timeout=timeout, wait=float(message.get("wait", 0)), limits=limits
                )
            else:
                answer = {"error": "unknown op"}
        except WarmBusy as exc:
            answer = {"busy": str(exc)}
        except WarmUnavailable as exc:
            answer = {"unavailable": str(exc)}
        except (ValueError, KeyError, TypeError) as exc:
            answer = {"error": f"bad request: {exc}"}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(answer).encode() + b"\n")


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


@contextlib.contextmanager
def serving(engine: WarmEngine, path: Path) -> Iterator[socketserver.BaseServer]:
    """A socket server for `engine` at `path` (replaced when a stale one is there), closed on exit; its
    `serve_forever` answers requests."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = _Server(str(path), _Handler)
    server.engine = engine  # type: ignore[attr-defined]
    os.chmod(path, 0o600)
    try:
        yield server
    finally:
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def request(path: Path, message: Mapping[str, object], *, timeout: float) -> dict[str, Any]:
    """Send one message to the engine at `path` and return its answer; WarmUnavailable when the engine is
    not there or does not answer within `timeout` seconds, or answers that it cannot serve it."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(str(path))
            connection.sendall(json.dumps(message).encode() + b"\n")
            with connection.makefile("rb") as reader:
                line = reader.readline(MESSAGE_MAX_BYTES + 1)
    except FileNotFoundError:
        raise WarmUnavailable("the warm engine is not running") from None
    except OSError as exc:
        raise WarmUnavailable(f"the warm engine did not answer: {exc}") from None
    if not line:
        raise WarmUnavailable("the warm engine closed the connection without an answer")
    answer: dict[str, Any] = json.loads(line)  # a JSON object: its values are as the engine wrote them
    if "busy" in answer:
        raise WarmBusy(answer["busy"])
    if "unavailable" in answer:
        raise WarmUnavailable(answer["unavailable"])
    if "error" in answer:
        raise ValueError(answer["error"])
    return answer
