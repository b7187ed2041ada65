"""Running latexmlc: one conversion in a sandbox (conversion.sandbox) and its own process group,
fenced by a memory limit and a hard wall-clock timeout enforced from outside (LaTeXML's own
--timeout is not reliable).

A bad document never raises: what went wrong is written into the log as LaTeXML would have
(`Fatal:...` then `Status:conversion:3`). Only a missing latexmlc, a sandbox that cannot start or a
programming error raises.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from conversion import cgroups, imagemagick
from conversion import sandbox as sandboxes
from conversion.choices import (
    LATEXML_NAMES,
    Category,
    Chunk,
    InfrastructureReason,
    KillReason,
    LatexmlStatus,
    OutputFormat,
)
from conversion.logparse import status_code_of
from conversion.machine import host_oom_kills
from conversion.processes import die_with_parent, scratch_prefix, scratch_sweep
from conversion.sandbox import Launch, Sandbox

LOG_NAME = "cortex.log"
# The answer of a conversion of TeX given as text (text_answer): {"result", "log", "status", "status_code"}.
TextAnswer = dict[str, str | int]
# The file that holds TeX given as text, in its working directory.
TEXT_INPUT_NAME = "input.tex"
DEFAULT_TIMEOUT_SECONDS = 300
DEFAULT_MEMORY_MB = 4096
# What a conversion may hold on disk: its working directory (the document included) and its /tmp together.
DEFAULT_DISK_MB = 2048
# How many processes a conversion may have at once: room for LaTeXML's helpers (ImageMagick, dvisvgm,
# latex for images), not for a fork loop.
DEFAULT_MAX_PROCESSES = 64
# How often a running conversion's disk and processes are measured, at most; RLIMIT_FSIZE stops any one
# file at the disk limit. Without a cgroup the process limit is held only by these checks, so they run this
# often throughout.
LIMIT_CHECK_SECONDS = 0.05
# With a cgroup the kernel holds processes and memory, and only the disk is a watch: the checks then come
# as rarely as LIMIT_CHECK_MAX_SECONDS, and no later than a writer at DISK_WRITE_BYTES_PER_SECOND could
# reach the disk limit from what the last check measured. A tight limit keeps the 50 ms checks; the
# default (2 GB) gets one check a quarter second, which is what the governor's picture of sizes needs.
LIMIT_CHECK_MAX_SECONDS = 0.25
DISK_WRITE_BYTES_PER_SECOND = 2 * 1024**3
# A watched conversion's resident size is measured at the first check and then at the first check at
# least this long after the last measurement.
RSS_CHECK_SECONDS = 0.25
# The status code of a conversion that failed: LaTeXML's fatal, as the plain number the results carry.
_FATAL = LatexmlStatus.FATAL.value
# latexmlc's own timeout is set a little beyond ours, so that ours (which also writes the log) fires first.
LATEXMLC_TIMEOUT_MARGIN_SECONDS = 5
# latexmlc runs at this lower CPU priority, so that on a machine it shares (web tier, dispatcher, database)
# the others' short requests are scheduled ahead of a long conversion; with nothing else to run it has no cost.
LATEXMLC_NICENESS = 10
# Time latexmlc gets to exit after SIGTERM before the whole group is killed.
TERMINATE_GRACE_SECONDS = 2.0
# A document that spams warnings can write a huge log; the worker must not run out of memory reading it.
LOG_MAX_BYTES = 32 * 1024 * 1024
_LOG_TAIL_BYTES = 256 * 1024
_STDERR_MAX_BYTES = 256 * 1024
_INSTALL_HINT = "apt-get install latexml"
_CHUNKS = frozenset(Chunk)
_MATH_CHUNKS = frozenset({Chunk.FORMULA, Chunk.MATH})
_FORMATS = frozenset(OutputFormat)
_PRELOAD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(?:\[[A-Za-z0-9_.,=\- ]*\])?$")


class EngineMissing(RuntimeError):
    """latexmlc cannot be found: nothing can be converted on this machine."""


class SandboxUnavailable(EngineMissing):
    """The sandbox cannot start here (bwrap missing, user namespaces refused): nothing is converted."""


class ConversionCancelled(Exception):
    """The caller's cancel event was set: the conversion was stopped and has no result."""


@dataclass(frozen=True)
class Conversion:
    log: bytes  # the cortex.log content, with `Info:runtime_ms:N` appended (and the timeout lines when killed)
    output_dir: Path  # where the HTML and its assets were written
    status_code: int | None  # from the log's Status:conversion:N line, 3 when killed
    timed_out: bool
    runtime_ms: int
    killed: str | None = None  # a KillReason when it was stopped from outside or died out of memory
    peak_rss: int = 0  # the largest resident size of all its processes together, in bytes (when watched)
    cpu_ms: int | None = None  # the CPU time (user and system) of all its processes together, when measured


class Watch:
    """A running conversion as its worker's memory governor (conversion.governor) sees it. The engine
    measures its resident size at its limit checks; the governor may ask it to stop, with the reason
    that goes into its log. Attribute writes are atomic under the GIL: no lock is needed."""

    def __init__(self) -> None:
        self.rss = 0
        self.peak_rss = 0
        self.stop_reason: str | None = None

    def stop(self, why: str) -> None:
        self.stop_reason = why

    def measured(self, rss: int) -> None:
        self.rss = rss
        self.peak_rss = max(self.peak_rss, rss)


@dataclass(frozen=True)
class Limits:
    """What one conversion may use: its timeout, address space, disk and processes at once."""

    timeout: float = DEFAULT_TIMEOUT_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB
    disk_mb: int = DEFAULT_DISK_MB
    max_processes: int = DEFAULT_MAX_PROCESSES

    def __post_init__(self) -> None:
        if self.memory_mb < 1 or self.disk_mb < 1 or self.max_processes < 1 or self.timeout <= 0:
            raise ValueError("memory_mb, disk_mb, max_processes and timeout must be positive")


@dataclass(frozen=True)
class Run:
    returncode: int
    timed_out: bool
    runtime_ms: int
    stderr: bytes
    # What it was killed for at a check: "disk", "processes", "governor", or "memory" when its cgroup's
    # memory limit made the kernel end one of its processes.
    limit: str | None = None
    governor: str | None = None  # the governor's reason, when it stopped the run
    # The kernel's OOM killer acted on the host while it ran, and it died of SIGKILL that neither its own
    # cgroup's limit nor this engine sent: the host's memory ended it, not the document.
    host_oom: bool = False
    cpu_ms: int | None = None  # CPU time of all its processes (cpu_time_ms), None when it cannot be read
    peak_rss: int = 0  # the largest resident size its watch measured, bytes (0: not watched)


def latexmlc_path(latexmlc: str = "latexmlc") -> str:
    """The absolute path of the latexmlc executable; raises EngineMissing when there is none."""
    found = shutil.which(latexmlc)
    if found is None:
        raise EngineMissing(f"{latexmlc} is not installed: {_INSTALL_HINT}")
    return found


_versions: dict[tuple[str, Sandbox, tuple[Path, ...]], str] = {}
_versions_lock = threading.Lock()
VERSION_PROBE_SECONDS = 60
VERSION_MAX_CHARS = 200


def engine_version(executable: str, *, sandbox: Sandbox = sandboxes.DEFAULT, read_only: Sequence[Path] = ()) -> str:
    """What `executable --VERSION` says (latexmlc: `latexmlc (LaTeXML version 0.8.7)`), its first line, run
    once per executable in this process (in the sandbox, as a conversion would be); an engine that says
    nothing gives `unknown (exit code N)`."""
    key = (executable, sandbox, tuple(read_only))
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("cortex-version-")) as scratch:
        os.chmod(scratch, 0o711)  # noqa: S103 - passable: the sandbox user reaches work/ through it
        work = Path(scratch) / "work"
        work.mkdir()
        try:
            with sandboxes.launched(sandbox, work, executable, read_only=read_only) as launch:
                probe = subprocess.run(
                    [*launch.argv_prefix, launch.executable, "--VERSION"], **launch.popen_options(),
                    stdin=subprocess.DEVNULL, capture_output=True, timeout=VERSION_PROBE_SECONDS, check=False,
                )  # fmt: skip
            # latexmlc says it on stderr; another engine may use stdout.
            said = (probe.stdout + b"\n" + probe.stderr).decode(errors="replace")
            lines = [line.strip() for line in said.splitlines() if line.strip()]
            version = lines[0][:VERSION_MAX_CHARS] if lines else f"unknown (exit code {probe.returncode})"
        except (OSError, subprocess.SubprocessError) as exc:
            version = f"unknown ({' '.join(str(exc).split())[:150]})"
    with _versions_lock:
        _versions[key] = version
    return version


def sandbox_check(sandbox: Sandbox) -> None:
    """Raise SandboxUnavailable, with the reason in one line, when `sandbox` cannot run a command here."""
    why = sandboxes.problem(sandbox)
    if why is not None:
        raise SandboxUnavailable(" ".join(why.split()))


def convert(
    source_dir: Path,
    main_file: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    memory_mb: int = DEFAULT_MEMORY_MB,
    disk_mb: int = DEFAULT_DISK_MB,
    max_processes: int = DEFAULT_MAX_PROCESSES,
    latexmlc: str = "latexmlc",
    extra_args: Sequence[str] = (),
    read_only: Sequence[Path] = (),
    cancel: threading.Event | None = None,
    sandbox: Sandbox = sandboxes.DEFAULT,
    root: Path | None = None,
    watch: Watch | None = None,
) -> Conversion:
    """Convert `main_file` (relative to `source_dir`) to HTML5 in a fresh directory inside `source_dir`.

    The run sees `root` (`source_dir` by default; `source_dir` must lie inside it), the host paths
    `read_only` at their own places, and nothing else. `extra_args` are the options of a converter
    profile (conversion.profiles.Invocation: paths in them are host paths in `read_only`) and go
    between latexmlc's fixed options and the source; paths inside `root` must be given as the run sees
    them (`root` is /work in the sandbox).
    A `watch` gets the run's resident size while it runs, and stops it when its governor asks.
    Raises EngineMissing without latexmlc, SandboxUnavailable when the sandbox cannot start,
    ConversionCancelled when `cancel` is set meanwhile."""
    limits = Limits(timeout, memory_mb, disk_mb, max_processes)
    executable = latexmlc_path(latexmlc)
    sandbox_check(sandbox)
    source_dir = Path(source_dir).resolve()
    output_dir = Path(tempfile.mkdtemp(prefix=".cortex-output-", dir=source_dir))
    log_path = source_dir / LOG_NAME
    # A log left by an earlier run must not be read as this run's.
    log_path.unlink(missing_ok=True)
    root = source_dir if root is None else Path(root).resolve()
    policy = imagemagick.policy_xml(memory_mb=memory_mb, disk_mb=disk_mb, timeout=timeout)
    with sandboxes.launched(
        sandbox, root, executable, start=source_dir, read_only=read_only, imagemagick_policy=policy
    ) as launch:
        argv = [
            launch.executable,
            "--format=html5",
            f"--dest={launch.inside(output_dir / (PurePath(main_file).stem + '.html'))}",
            f"--log={LOG_NAME}",
            f"--timeout={latexmlc_timeout(timeout)}",
            *extra_args,
            _source_argument(main_file),
        ]
        run = _run_latexmlc(argv, launch=launch, limits=limits, cancel=cancel, watch=watch)
    _keep_directory(output_dir)
    log, status_code, killed = finish_log(_read_log(log_path), run, limits)
    return Conversion(
        log=log, output_dir=output_dir, status_code=status_code, timed_out=run.timed_out, runtime_ms=run.runtime_ms,
        killed=killed, peak_rss=run.peak_rss, cpu_ms=run.cpu_ms,
    )  # fmt: skip


def text_options(
    *,
    whatsin: str = "document",
    whatsout: str = "document",
    format: str = "html5",
    includestyles: bool = False,
    pmml: bool = False,
    cmml: bool = False,
    preload: Sequence[str] = (),
) -> list[str]:
    """latexmlc's options for converting TeX given as text (convert_text, and the warm engine's servers,
    conversion.warm), but for the destination, the log, the timeout and the source; raises ValueError for an
    unknown switch value or a preload that is not a binding's name."""
    if whatsin not in _CHUNKS or whatsout not in _CHUNKS:
        raise ValueError(f"whatsin and whatsout must be one of {sorted(chunk.value for chunk in Chunk)}")
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {sorted(known.value for known in OutputFormat)}")
    bad = [name for name in preload if not _PRELOAD_NAME.match(name)]
    if bad:
        raise ValueError(f"not a binding name to preload: {bad[0]!r}")
    # Formula in, formula out: without a math switch LaTeXML would answer in its own XMath schema.
    if whatsin in _MATH_CHUNKS and whatsout in _MATH_CHUNKS and not (pmml or cmml):
        pmml = True
    return [
        f"--format={format}",
        f"--whatsin={whatsin}",
        f"--whatsout={whatsout}",
        *(["--includestyles"] if includestyles else []),
        *(["--pmml"] if pmml else []),
        *(["--cmml"] if cmml else []),
        *(f"--preload={name}" for name in preload),
    ]


def text_result_name(format: str) -> str:
    """The destination's file name (in the working directory) of a conversion of TeX given as text."""
    return f"result.{OutputFormat(format).extension}"


def convert_text(
    tex: str,
    *,
    whatsin: str = "document",
    whatsout: str = "document",
    format: str = "html5",
    timeout: float = 60,
    includestyles: bool = False,
    pmml: bool = False,
    cmml: bool = False,
    preload: Sequence[str] = (),
    latexmlc: str = "latexmlc",
    memory_mb: int = DEFAULT_MEMORY_MB,
    disk_mb: int = DEFAULT_DISK_MB,
    max_processes: int = DEFAULT_MAX_PROCESSES,
    sandbox: Sandbox = sandboxes.DEFAULT,
) -> TextAnswer:
    """Convert TeX given as text (a `literal:` prefix is accepted and dropped) in a temporary directory.

    Returns {"result", "log", "status", "status_code"}; raises ValueError for an unknown switch value,
    EngineMissing without latexmlc and SandboxUnavailable when the sandbox cannot start."""
    options = text_options(whatsin=whatsin, whatsout=whatsout, format=format, includestyles=includestyles,
                           pmml=pmml, cmml=cmml, preload=preload)  # fmt: skip
    limits = Limits(timeout, memory_mb, disk_mb, max_processes)
    executable = latexmlc_path(latexmlc)
    sandbox_check(sandbox)
    source = tex.removeprefix("literal:")
    scratch_sweep()
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("cortex-text-")) as scratch:
        # Passable, not listable: the sandbox user (nobody, when we are root) reaches work/ through it, and
        # the run's /tmp goes beside work/, so one directory holds all the request wrote.
        os.chmod(scratch, 0o711)  # noqa: S103
        work_dir = Path(scratch).resolve() / "work"
        work_dir.mkdir()
        # The text goes through a file, not a `literal:` argument: no argument-length limit, no option injection.
        (work_dir / TEXT_INPUT_NAME).write_text(source, encoding="utf-8")
        dest = work_dir / text_result_name(format)
        policy = imagemagick.policy_xml(memory_mb=memory_mb, disk_mb=disk_mb, timeout=timeout)
        with sandboxes.launched(sandbox, work_dir, executable, imagemagick_policy=policy) as launch:
            argv = [
                launch.executable,
                *options[:3],
                f"--dest={launch.inside(dest)}",
                f"--log={LOG_NAME}",
                f"--timeout={latexmlc_timeout(timeout)}",
                *options[3:],
                f"./{TEXT_INPUT_NAME}",
            ]
            run = _run_latexmlc(argv, launch=launch, limits=limits, cancel=None)
        log, status_code, _ = finish_log(_read_log(work_dir / LOG_NAME), run, limits)
        result = read_regular_file(dest)
    return text_answer(result, log, status_code)


def text_answer(result: bytes, log: bytes, status_code: int | None) -> TextAnswer:
    """The answer of a conversion of TeX given as text: {"result", "log", "status", "status_code"}."""
    code = _FATAL if status_code is None else status_code
    return {
        "result": result.decode("utf-8", errors="replace").strip(),
        "log": log.decode("utf-8", errors="replace"),
        "status": LATEXML_NAMES.get(code, LATEXML_NAMES[_FATAL]),
        "status_code": code,
    }


def _keep_directory(path: Path) -> None:
    """Make `path` a real directory again when the run replaced it: a link there would point the
    caller, who reads the output on the host, at the host's files."""
    if path.is_dir() and not path.is_symlink():
        return
    if path.is_symlink() or path.exists():
        path.unlink()
    path.mkdir()


def latexmlc_timeout(timeout: float) -> int:
    return math.ceil(timeout) + LATEXMLC_TIMEOUT_MARGIN_SECONDS


def _source_argument(main_file: str) -> str:
    # "./" keeps a file named "-x.tex" from reading as an option and "literal:x.tex" from reading as TeX.
    return main_file if PurePath(main_file).is_absolute() else f"./{main_file}"


def _run_latexmlc(
    argv: list[str],
    *,
    launch: Launch,
    limits: Limits,
    cancel: threading.Event | None,
    watch: Watch | None = None,
) -> Run:
    """Run latexmlc (in its sandbox) in its own session; kill it all at the deadline; leave no process behind.

    In the sandbox latexmlc runs in a session and a pid namespace of its own under bwrap: killing
    bwrap's group kills bwrap, whose death kills the namespace's first process (--die-with-parent),
    and the kernel kills every process of a namespace whose first process ends.

    The disk it holds (launch.written: its working directory and its /tmp) and its processes (the
    sandbox's first process and all it started) are measured every LIMIT_CHECK_SECONDS (with a cgroup, as
    rarely as check_interval allows); past its disk or process limit it is killed at once with SIGKILL, and
    no one file can grow past the disk limit at all (RLIMIT_FSIZE: the writer gets SIGXFSZ). A `watch` gets
    its resident size every RSS_CHECK_SECONDS, and a stop its governor asked for kills it at the next check.

    Where a cgroup can be made (conversion.cgroups) the run gets one, joined before exec: its processes
    and threads cannot pass the process limit (a fork past it fails, and the run is then killed at the
    next check), and all its processes together cannot pass its memory budget (RLIMIT_AS holds each
    one alone). Elsewhere the process limit is the count of the checks."""
    timeout, max_processes = limits.timeout, limits.max_processes
    limit = limits.memory_mb * 1024 * 1024
    disk_limit = limits.disk_mb * 1024 * 1024

    def limit_memory() -> None:
        # Runs in the child between fork and exec; setrlimit takes no lock, so this is safe with threads.
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_FSIZE, (disk_limit, disk_limit))
        os.nice(LATEXMLC_NICENESS)
        # latexmlc runs in its own session, so nothing else stops it when its caller (a web worker, the
        # worker) is killed outright; the signal comes when the thread that started it ends, and that
        # thread waits for latexmlc, so only its death sends it.
        die_with_parent(signal.SIGKILL)  # off Linux, a killed parent leaves latexmlc to its own --timeout

    with (
        cgroups.quota(max_processes=max_processes, memory_bytes=limit) as quota,
        tempfile.TemporaryFile() as stderr,
    ):
        join = quota.join_fds() if quota is not None else []

        def limit_and_join() -> None:
            limit_memory()
            cgroups.Quota.join(join)  # a write to descriptors opened before the fork: no lock

        started = time.monotonic()
        oom_kills_before = host_oom_kills()
        try:
            process = subprocess.Popen(
                [*launch.argv_prefix, *argv],
                **launch.popen_options(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=limit_and_join,
            )
        finally:
            for fd in join:
                os.close(fd)
        launch.started()
        timed_out = cancelled = False
        passed: list[str] = []
        namespace_pidfd: int | None = None
        try:
            first = launch.first_process(timeout=max(timeout, 1))
            namespace_pidfd = _open_pidfd(first)
            root = first if first is not None else process.pid

            rss_measured = -math.inf
            disk_used = 0
            cpu_sampled = 0  # the tree's CPU time at the last measurement, ms: the count without a cgroup's

            def over_limit() -> bool:
                nonlocal rss_measured, disk_used, cpu_sampled
                now = time.monotonic()
                measure = watch is not None and now - rss_measured >= RSS_CHECK_SECONDS
                if measure:
                    rss_measured = now
                if quota is not None:
                    capped = _quota_passed(quota)
                    _, rss, cpu = _process_tree(root, stop_above=max_processes, rss=True) if measure else (0, 0, 0)
                else:
                    count, rss, cpu = _process_tree(root, stop_above=max_processes, rss=measure)
                    capped = KillReason.PROCESSES if count > max_processes else None
                if measure and watch is not None:
                    watch.measured(rss)
                    cpu_sampled = max(cpu_sampled, cpu)
                if watch is not None and watch.stop_reason is not None:
                    passed.append(KillReason.GOVERNOR)
                elif (
                    capped == KillReason.MEMORY
                ):  # the kernel ended one of its processes: the rest would go on without it
                    passed.append(capped)
                elif (disk_used := _disk_used(launch.written)) > disk_limit:
                    passed.append(KillReason.DISK)
                elif capped is not None:
                    passed.append(capped)
                return bool(passed)

            def next_check() -> float:
                return LIMIT_CHECK_SECONDS if quota is None else check_interval(disk_limit - disk_used)

            outcome = _wait_for_exit(
                process.pid, started + timeout, cancel, over_limit=over_limit, check_every=next_check
            )
            if outcome == "exited" and not passed and quota is not None and (capped := _quota_passed(quota)):
                passed.append(capped)  # the cap acted, and the run ended before the next check saw it
            timed_out, cancelled = outcome == "deadline", outcome == "cancelled"
            if outcome not in ("exited", "over_limit"):  # past a limit, not one more write or fork: SIGKILL below
                _signal_group(process.pid, signal.SIGTERM)
                _wait_for_exit(process.pid, time.monotonic() + TERMINATE_GRACE_SECONDS, None)
        finally:
            # The leader is not reaped yet, so the group id cannot have been reused: killing it is safe,
            # and takes any helper latexmlc started along with it.
            _signal_group(process.pid, signal.SIGKILL)
            usage = _reap(process)
            _wait_for_group_gone(process.pid)
            if namespace_pidfd is not None:
                _wait_for_namespace_gone(namespace_pidfd)
        runtime_ms = int((time.monotonic() - started) * 1000)
        cpu_ms = cpu_time_ms(quota, usage, cpu_sampled)
        if cancelled:
            raise ConversionCancelled("the conversion was cancelled")
        size = stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, size - _STDERR_MAX_BYTES))
        returncode = process.returncode if launch.info_fd is None else sandboxes.exit_status(process.returncode)
        return Run(
            returncode=returncode,
            timed_out=timed_out,
            runtime_ms=runtime_ms,
            stderr=stderr.read(),
            limit=passed[0] if passed else None,
            governor=watch.stop_reason if watch is not None and passed[:1] == [KillReason.GOVERNOR] else None,
            host_oom=_host_oom(returncode, passed, timed_out, oom_kills_before),
            cpu_ms=cpu_ms,
            peak_rss=watch.peak_rss if watch is not None else 0,
        )


def _host_oom(returncode: int, passed: list[str], timed_out: bool, oom_kills_before: int | None) -> bool:
    """Whether a run that died of SIGKILL was ended by the kernel's OOM killer for the host: no limit of its own
    was passed (its cgroup's OOM kills are such a limit, KillReason.MEMORY) and the host's OOM kill count grew
    while it ran. Another conversion's own cgroup limit acting at the same moment counts too: a rare retry."""
    if returncode != -signal.SIGKILL or passed or timed_out or oom_kills_before is None:
        return False
    after = host_oom_kills()
    return after is not None and after > oom_kills_before


def _reap(process: subprocess.Popen[bytes]) -> resource.struct_rusage | None:
    """Wait for the run's first process and return the resources it and every descendant it waited for
    used (wait4); None when Popen had reaped it already."""
    if process.returncode is not None:
        return None
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except ChildProcessError:
        process.wait()
        return None
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage


def cpu_time_ms(quota: cgroups.Quota | None, usage: resource.struct_rusage | None, sampled: int = 0) -> int | None:
    """The CPU time (user and system) a run's processes used together, in ms: its cgroup's count where it
    keeps one (every process of the group, exact). Without one, the larger of what its process tree had used
    at the last measurement (`sampled`; a watched run's, every RSS_CHECK_SECONDS) and what the processes its
    first process waited for used (wait4's rusage; bwrap leaves the sandbox's init unwaited, so a sandboxed
    run counts next to nothing there): a lower bound."""
    if quota is not None:
        with contextlib.suppress(OSError, ValueError):
            used = quota.cpu_usec()
            if used is not None:
                return used // 1000
    waited = int((usage.ru_utime + usage.ru_stime) * 1000) if usage is not None else 0
    return max(waited, sampled) if usage is not None or sampled else None


def _open_pidfd(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_for_namespace_gone(pidfd: int, limit: float = 5.0) -> None:
    """Wait until the sandbox's first process has ended: the kernel ends it only after every other
    process of its pid namespace is gone. It gets SIGKILL itself if bwrap's death did not end it."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    try:
        if not poller.poll(int(limit * 1000)):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            poller.poll(int(limit * 1000))
    finally:
        os.close(pidfd)


def check_interval(disk_room: int) -> float:
    """Seconds until the next limit check of a run whose processes and memory its cgroup holds, with
    `disk_room` bytes left under its disk limit at the last check: between LIMIT_CHECK_SECONDS and
    LIMIT_CHECK_MAX_SECONDS, and no longer than a writer at DISK_WRITE_BYTES_PER_SECOND needs for that room."""
    return min(LIMIT_CHECK_MAX_SECONDS, max(LIMIT_CHECK_SECONDS, disk_room / DISK_WRITE_BYTES_PER_SECOND))


def _wait_for_exit(
    pid: int,
    deadline: float,
    cancel: threading.Event | None,
    *,
    over_limit: Callable[[], bool] | None = None,
    check_every: Callable[[], float] = lambda: LIMIT_CHECK_SECONDS,
) -> str:
    """Wait until the child exits (without reaping it), the deadline passes, `cancel` is set or
    `over_limit()` (asked every `check_every()` seconds) says yes."""
    try:
        # A pidfd becomes readable when the process exits, so the wait costs no polling.
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    poller = select.poll()
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    try:
        while True:
            if _has_exited(pid):
                return "exited"
            if cancel is not None and cancel.is_set():
                return "cancelled"
            if over_limit is not None and over_limit():
                return "over_limit"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "deadline"
            step = min(remaining, 0.25 if cancel is not None else remaining)
            if over_limit is not None:
                step = min(step, check_every())
            if pidfd is not None:
                poller.poll(max(1, int(step * 1000)))
            else:
                time.sleep(min(step, 0.05))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _has_exited(pid: int) -> bool:
    # WNOWAIT leaves the child a zombie, which keeps its pid and process group id from being reused.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _wait_for_group_gone(pgid: int, limit: float = 2.0) -> None:
    """Give killed helpers of latexmlc a moment to disappear, so none outlives the call."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _open_no_link(path: Path) -> int:
    # The run may have put a link where its log or result was: read on the host, it would leak host files.
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)


def read_regular_file(path: Path) -> bytes:
    """The file's bytes, or nothing when it is missing, a link or not a regular file."""
    try:
        with open(_open_no_link(path), "rb") as handle:
            return handle.read() if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) else b""
    except OSError:
        return b""


def _read_log(path: Path) -> bytes:
    """The log file, cut in the middle when it is huge (the end holds the status line)."""
    try:
        with open(_open_no_link(path), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return b""
            size = handle.seek(0, os.SEEK_END)
            handle.seek(0)
            if size <= LOG_MAX_BYTES:
                return handle.read()
            head = handle.read(LOG_MAX_BYTES - _LOG_TAIL_BYTES)
            handle.seek(size - _LOG_TAIL_BYTES)
            tail = handle.read()
    except OSError:
        # Missing, or a link the run left in its place (ELOOP): there is no log to read.
        return b""
    cut = f"\nInfo:truncated:log the log was {size} bytes; its middle was left out\n".encode()
    return head + cut + tail


def finish_log(log: bytes, run: Run, limits: Limits) -> tuple[bytes, int | None, str | None]:
    """Append what latexmlc could not say itself (a limit, a timeout, its death) and the runtime; return
    the log, the status and what the run was killed for (a KillReason, or None)."""
    if not log.strip():
        # latexmlc died before it opened its log: its stderr is the only record.
        log = run.stderr
    status_code = status_code_of(log)
    fatal: str | None = None  # the line that says why the conversion ended, where latexmlc could not say it
    killed: str | None = None
    if run.limit == KillReason.GOVERNOR:
        fatal = (
            f"Fatal:{Category.INFRASTRUCTURE}:{InfrastructureReason.GOVERNOR} the worker's memory governor stopped"
            f" the conversion: {run.governor}"
        )
        killed = KillReason.GOVERNOR
    elif run.limit == KillReason.MEMORY:
        fatal = f"{_OUT_OF_MEMORY} the conversion's processes together passed its memory limit of {limits.memory_mb} MB"
        killed = KillReason.MEMORY
    elif run.limit == KillReason.DISK or run.returncode == -signal.SIGXFSZ:
        fatal = (
            f"Fatal:{Category.LIMIT}:{KillReason.DISK} the conversion wrote more than its disk limit of"
            f" {limits.disk_mb} MB (its working directory and /tmp together)"
        )
        killed = KillReason.DISK
    elif run.limit == KillReason.PROCESSES:
        fatal = (
            f"Fatal:{Category.LIMIT}:{KillReason.PROCESSES} the conversion tried to run more than its limit of"
            f" {limits.max_processes} processes at once"
        )
        killed = KillReason.PROCESSES
    elif run.timed_out:
        fatal = f"Fatal:timeout:timedout Conversion exceeded the timeout of {limits.timeout:g} seconds"
        killed = KillReason.TIMEOUT
    elif status_code is None and run.host_oom:
        fatal = (
            f"Fatal:{Category.INFRASTRUCTURE}:{InfrastructureReason.HOST_OOM} the kernel's OOM killer ended the"
            " conversion for the host's memory (its own memory limit was not reached)"
        )
        killed = KillReason.HOST_OOM
    elif status_code is None:
        fatal = _death_message(run, log, limits.memory_mb)
        killed = KillReason.MEMORY if fatal.startswith(_OUT_OF_MEMORY) else None
    lines: list[str] = []
    if fatal is not None:
        lines += [fatal, f"Status:conversion:{_FATAL}"]
        status_code = _FATAL
    lines.append(f"Info:runtime_ms:{run.runtime_ms}")
    if run.cpu_ms is not None:
        lines.append(f"Info:cpu_ms:{run.cpu_ms}")
    if run.peak_rss:
        lines.append(f"Info:peak_rss_kb:{run.peak_rss // 1024}")
    if log and not log.endswith(b"\n"):
        log += b"\n"
    return log + "".join(f"{line}\n" for line in lines).encode(), status_code, killed


_OUT_OF_MEMORY = "Fatal:perl:out_of_memory"


def _quota_passed(quota: cgroups.Quota) -> str | None:
    """The cap the run's cgroup held it at: "memory" when the kernel ended one of its processes there,
    "processes" when a fork was refused, else None (also when the counts cannot be read)."""
    try:
        if quota.oom_kills():
            return KillReason.MEMORY
        return KillReason.PROCESSES if quota.refused_forks() else None
    except (OSError, ValueError):
        return None


def _death_message(run: Run, log: bytes, memory_mb: int) -> str:
    if b"Out of memory" in run.stderr or b"Out of memory" in log[-_LOG_TAIL_BYTES:]:
        return f"{_OUT_OF_MEMORY} latexmlc ran out of memory (limit {memory_mb} MB)"
    if run.returncode < 0:
        try:
            name = signal.Signals(-run.returncode).name
        except ValueError:
            name = "unknown signal"
        return f"Fatal:perl:die latexmlc exited with signal {-run.returncode} ({name})"
    return f"Fatal:perl:die latexmlc exited with code {run.returncode} and no status line"


def _disk_used(directories: Sequence[Path]) -> int:
    """Bytes of disk the files below `directories` take (links not followed; what vanishes meanwhile
    counts nothing)."""
    used = 0
    pending = [str(directory) for directory in directories]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
    return used


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _process_tree(pid: int, *, stop_above: int, rss: bool = False) -> tuple[int, int, int]:
    """How many processes `pid` and everything it started are (from /proc's children lists), counted no
    further than just past `stop_above`, and with `rss` their resident size together in bytes and the CPU
    time they used in ms, their reaped children's included (else 0 and 0)."""
    count = resident = ticks = 0
    pending = [pid]
    while pending and count <= stop_above:
        current = pending.pop()
        try:
            threads = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # gone meanwhile
        count += 1
        if rss:
            try:
                with open(f"/proc/{current}/statm", "rb") as statm:
                    resident += int(statm.read().split()[1]) * _PAGE_SIZE
                with open(f"/proc/{current}/stat", "rb") as stat_file:
                    # utime, stime, cutime, cstime: fields 14-17, counted after the ")" that ends the name.
                    fields = stat_file.read().rsplit(b")", 1)[1].split()
                    ticks += sum(int(value) for value in fields[11:15])
            except (OSError, IndexError, ValueError):
                pass
        for thread in threads:
            try:
                with open(f"/proc/{current}/task/{thread}/children") as listing:
                    pending.extend(int(child) for child in listing.read().split())
            except OSError:
                continue
    return count, resident, int(ticks * _TICK_MS)
