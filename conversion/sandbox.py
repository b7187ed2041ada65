"""The bubblewrap sandbox around every latexmlc run: TeX is untrusted input, and LaTeXML loads Perl
bindings (`*.ltxml`) from the document's own directory, so a document can run arbitrary code.

Inside, the run sees its working directory read-write at /work, the TeX and Perl installation
read-only, what its converter profile names (an engine's installation, stylesheets, binding paths)
read-only at the same paths as outside, its own /tmp (a directory on disk beside the working
directory, so what it writes there is disk, under the conversion's disk limit, not memory), a /proc of
its own pid namespace (or none, with proc `none`) and a minimal /dev; no network, no home, no other
part of /etc or of the host. Run as root, bwrap itself runs as an unprivileged user (nobody) and the
working directory is handed to that user for the run.
Mode `none` runs latexmlc directly (no isolation).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypedDict

from conversion import imagemagick
from conversion.choices import SandboxMode, SandboxProc
from conversion.processes import scratch_prefix

MODES: tuple[str, ...] = tuple(mode.value for mode in SandboxMode)
PROCS: tuple[str, ...] = tuple(proc.value for proc in SandboxProc)
# The working directory as latexmlc sees it inside the sandbox.
INSIDE_WORK = PurePosixPath("/work")
# The sandbox's own /tmp: HOME and TMPDIR of the run point there.
INSIDE_TMP = "/tmp"  # noqa: S108
# Where an engine executable from outside the bound directories (a stand-in script) is copied to.
_INSIDE_ENGINE_DIR = PurePosixPath("/run/engine")
# nobody/nogroup: the user bwrap runs as when the calling process is root.
SANDBOX_UID = 65534
SANDBOX_GID = 65534
# Read-only: the installation (Perl, LaTeXML, TeX Live under /usr), TeX's configuration and its
# file database (ls-R, formats), ImageMagick's configuration (its delegates; its policy file is replaced
# for the run where the caller gives one, conversion/imagemagick.py), and the linker cache.
_READ_ONLY = ("/usr", "/etc/texmf", "/var/lib/texmf", "/etc/ImageMagick-6", "/etc/ImageMagick-7", "/etc/ld.so.cache")
# Top-level directories that merged-/usr systems make symlinks into /usr (real directories elsewhere).
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Passed through to latexmlc so messages read as they do outside; nothing else of our environment
# (DATABASE_URL, SECRET_KEY, tokens) enters the sandbox.
_PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE")
_INSTALL_HINT = "apt-get install bubblewrap"
# What bwrap says when the kernel refuses it a fresh /proc, and what to do about it.
_PROC_REFUSED = "Can't mount proc"
_PROC_HINT = (
    "a container's masked /proc paths refuse the sandbox a /proc of its own: run the container with"
    " systempaths=unconfined, or set CONVERSION_SANDBOX_PROC=none (docs/decisions/container-sandbox.md)"
)
_PROBE_TIMEOUT_SECONDS = 20
_CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)\s*[,}]')

# Where the sandbox mounts its own: a path bound for a profile may not be one of these or lie above one.
_OWN_MOUNTS = (
    PurePosixPath(INSIDE_TMP),
    INSIDE_WORK,
    PurePosixPath("/proc"),
    PurePosixPath("/dev"),
    _INSIDE_ENGINE_DIR,
)

_usable: set[Sandbox] = set()  # sandboxes whose probe succeeded in this process
_usable_lock = threading.Lock()


@dataclass(frozen=True)
class Sandbox:
    """How latexmlc runs: `bwrap` (isolated, the default) or `none` (directly, chosen explicitly)."""

    mode: str = SandboxMode.BWRAP.value
    bwrap: str = "bwrap"  # the bubblewrap executable, a name looked up on PATH or a path
    proc: str = SandboxProc.MOUNT.value  # a /proc of the sandbox's own, or none

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"the sandbox mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.proc not in PROCS:
            raise ValueError(f"the sandbox's /proc must be one of {', '.join(PROCS)}, not {self.proc!r}")

    @property
    def enabled(self) -> bool:
        return self.mode == SandboxMode.BWRAP


DEFAULT = Sandbox()


class PopenOptions(TypedDict):
    """The keyword arguments of subprocess.Popen that Launch.popen_options gives."""

    cwd: Path
    env: dict[str, str] | None
    user: int | None
    group: int | None
    extra_groups: list[int] | None
    pass_fds: tuple[int, ...]


@dataclass
class Launch:
    """One run's command line and process settings, with host paths translated to the sandbox's."""

    argv_prefix: list[str]  # bwrap and its options; empty without a sandbox
    executable: str  # the engine as seen by the run
    cwd: Path  # the directory the process starts in on the host
    work_dir: Path  # the caller's working directory
    env: dict[str, str] | None = None
    user: int | None = None
    group: int | None = None
    pass_fds: tuple[int, ...] = ()
    info_fd: int | None = None  # read end of bwrap's --info-fd, which names the sandbox's first process
    inside_work: PurePosixPath | None = None
    # The host directories whose contents count against the run's disk limit: its working directory
    # (as bound) and its /tmp.
    written: tuple[Path, ...] = ()

    def inside(self, path: Path) -> str:
        """A host path inside the working directory, as the run sees it."""
        if self.inside_work is None:
            return str(path)
        return str(self.inside_work / Path(path).relative_to(self.work_dir))

    def popen_options(self) -> PopenOptions:
        """Keyword arguments for subprocess.Popen: where, as whom and with what environment to start."""
        return {
            "cwd": self.cwd, "env": self.env, "user": self.user, "group": self.group,
            "extra_groups": [] if self.user is not None else None, "pass_fds": self.pass_fds,
        }  # fmt: skip

    def started(self) -> None:
        """Close our copies of the descriptors handed to bwrap (so its info pipe ends when bwrap does)."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()

    def first_process(self, timeout: float) -> int | None:
        """The host pid of the sandbox's first process, whose end is the end of every process in it;
        None without a sandbox or when bwrap said nothing within `timeout` seconds."""
        if self.info_fd is None:
            return None
        data = b""
        poller = select.poll()
        poller.register(self.info_fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while (found := _CHILD_PID.search(data)) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(max(1, int(remaining * 1000))):
                return None
            chunk = os.read(self.info_fd, 4096)
            if not chunk:
                return None
            data += chunk
        return int(found.group(1))


def problem(sandbox: Sandbox) -> str | None:
    """None when the sandbox works (checked once per process by running a command in it), else why not."""
    if not sandbox.enabled or sandbox in _usable:
        return None
    why = _probe(sandbox)
    if why is None:
        with _usable_lock:
            _usable.add(sandbox)
    return why


def _probe(sandbox: Sandbox) -> str | None:
    executable = shutil.which(sandbox.bwrap)
    if executable is None:
        return f"the conversion sandbox cannot start: {sandbox.bwrap} is not installed ({_INSTALL_HINT})"
    touch = shutil.which("touch", path="/usr/bin:/bin") or "/usr/bin/touch"
    with tempfile.TemporaryDirectory(prefix="cortex-probe-") as work:
        work_dir = Path(work)
        try:
            with launched(sandbox, work_dir, touch) as launch:
                result = subprocess.run(
                    [*launch.argv_prefix, launch.executable, "probe"], **launch.popen_options(),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    timeout=_PROBE_TIMEOUT_SECONDS, check=False,
                )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the conversion sandbox cannot start: {exc}"
        if result.returncode == 0 and (work_dir / "probe").is_file():
            return None
        lines = [line.strip() for line in result.stderr.decode(errors="replace").splitlines() if line.strip()]
        why = lines[-1] if lines else f"bwrap exited with code {result.returncode}"
        if _PROC_REFUSED in why:
            why = f"{why} ({_PROC_HINT})"
        return f"the conversion sandbox cannot start: {why}"


def bind_problem(path: Path) -> str | None:
    """Why a host path cannot be bound read-only into the sandbox at its own place (it would cover one of
    the sandbox's own mounts), or None."""
    inside = PurePosixPath(path)
    for own in _OWN_MOUNTS:
        if inside == own or inside in own.parents:
            return f"{path} would cover the sandbox's own {own}"
    return None


def under_own_mount(path: Path) -> bool:
    """Whether a host path lies under one of the sandbox's own mounts (its /work or /tmp, ...): bound at its
    own place it would appear inside the paper's directory or the run's /tmp."""
    inside = PurePosixPath(path)
    return any(inside == own or own in inside.parents for own in _OWN_MOUNTS)


@contextlib.contextmanager
def launched(
    sandbox: Sandbox,
    work_dir: Path,
    executable: str,
    *,
    start: Path | None = None,
    read_only: Sequence[Path] = (),
    imagemagick_policy: bytes = b"",
) -> Iterator[Launch]:
    """The launch settings for running `executable` on `work_dir`, in `start` (a directory inside it,
    `work_dir` itself by default), with a /tmp of its own that is removed afterwards; on exit the
    directory is ours again. The host paths `read_only` are bound read-only at their own places (a
    profile's engine installation, stylesheets and binding paths; bind_problem must have none to say).

    Without a sandbox the run is direct. With one, the working directory is bound at /work; as root
    it is handed to the sandbox user for the run, through a copy when that user cannot reach it; an
    `imagemagick_policy` (conversion.imagemagick) replaces the host's ImageMagick policy for the run,
    bound after `read_only`, so that no profile path covers it."""
    for path in read_only:
        if (why := bind_problem(path)) is not None:
            raise ValueError(why)
    work_dir = Path(work_dir).resolve()
    start = work_dir if start is None else Path(start).resolve()
    inside_start = INSIDE_WORK / start.relative_to(work_dir)  # ValueError when start is not inside work_dir
    if not sandbox.enabled:
        yield Launch(argv_prefix=[], executable=executable, cwd=start, work_dir=work_dir, written=(work_dir,))
        return
    bwrap = shutil.which(sandbox.bwrap)
    if bwrap is None:
        raise FileNotFoundError(f"{sandbox.bwrap} is not installed ({_INSTALL_HINT})")
    as_root = os.geteuid() == 0
    staging: Path | None = None
    tmp: Path | None = None
    bound = work_dir
    launch: Launch | None = None
    opened: list[int] = []
    try:
        if as_root and not _reachable(work_dir.parent):
            # bwrap resolves the path as the sandbox user: a private parent (a 0700 temp dir) would stop it.
            staging = Path(tempfile.mkdtemp(prefix=scratch_prefix("cortex-sandbox-"), dir=_staging_parent()))
            os.chmod(staging, 0o711)  # noqa: S103 - passable, not listable: the sandbox user must reach work/
            bound = staging / "work"
            shutil.copytree(work_dir, bound, symlinks=True)
        if as_root:
            _chown_tree(bound, SANDBOX_UID, SANDBOX_GID)
        tmp = _tmp_beside(bound)
        if as_root:
            os.chown(tmp, SANDBOX_UID, SANDBOX_GID)
        info_read, info_write = os.pipe()
        opened += [info_read, info_write]
        argv = [bwrap, *_filesystem_options(proc=sandbox.proc), "--bind", str(tmp), INSIDE_TMP]
        argv += ["--bind", str(bound), str(INSIDE_WORK)]
        for path in read_only:
            argv += ["--ro-bind", str(path), str(path)]
        argv += ["--chdir", str(inside_start)]
        inside_executable = executable
        roots: list[str | Path] = [*_READ_ONLY, *read_only]
        if not any(_is_within(Path(executable), Path(path)) for path in roots):
            # A stand-in engine from elsewhere is copied in: bwrap could not reach a private directory.
            engine_fd = os.open(executable, os.O_RDONLY | os.O_CLOEXEC)
            opened.append(engine_fd)
            inside_executable = str(_INSIDE_ENGINE_DIR / Path(executable).name)
            argv += ["--perms", "0555", "--file", str(engine_fd), inside_executable]
        if imagemagick_policy:
            argv += _policy_options(imagemagick_policy, opened)
        argv += ["--unshare-all", "--die-with-parent", "--new-session", "--info-fd", str(info_write)]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": INSIDE_TMP, "TMPDIR": INSIDE_TMP}
        env.update({name: os.environ[name] for name in _PASSED_ENV if name in os.environ})
        launch = Launch(
            argv_prefix=argv, executable=inside_executable, cwd=bound, work_dir=work_dir, env=env,
            user=SANDBOX_UID if as_root else None, group=SANDBOX_GID if as_root else None,
            pass_fds=tuple(fd for fd in opened if fd != info_read), info_fd=info_read, inside_work=INSIDE_WORK,
            written=(bound, tmp),
        )  # fmt: skip
        opened.clear()  # from here the launch closes them, each once
        yield launch
    finally:
        if launch is not None:
            launch.started()
            if launch.info_fd is not None:
                os.close(launch.info_fd)
        for fd in opened:
            os.close(fd)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if staging is not None:
            if launch is not None:
                _copy_back(bound, work_dir)
            shutil.rmtree(staging, ignore_errors=True)
        elif as_root:
            _chown_tree(bound, os.getuid(), os.getgid())


@contextlib.contextmanager
def host_with_policy(imagemagick_policy: bytes, bwrap: str = "bwrap") -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """(argv prefix, descriptors to pass) that run a command on the host as it is, every path, user and
    network included, with ImageMagick's policy alone replaced: how the benchmarks and tests run latexmlc
    directly in the environment the sandbox gives a conversion (its figures read as a worker reads them).
    Not a sandbox. The descriptors are closed on exit."""
    executable = shutil.which(bwrap)
    if executable is None:
        raise FileNotFoundError(f"{bwrap} is not installed ({_INSTALL_HINT})")
    opened: list[int] = []
    try:
        options = _policy_options(imagemagick_policy, opened)
        yield [executable, "--dev-bind", "/", "/", *options, "--"], tuple(opened)
    finally:
        for fd in opened:
            os.close(fd)


def exit_status(returncode: int) -> int:
    """bwrap reports a command killed by signal N as exit code 128+N; give it back as -N like Popen does."""
    return -(returncode - 128) if 128 < returncode < 128 + 65 else returncode


def _filesystem_options(*, proc: str) -> list[str]:
    options: list[str] = []
    for path in _READ_ONLY:
        options += ["--ro-bind-try", path, path]
    for name in _TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            options += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            options += ["--ro-bind", str(host), str(host)]
    # No tmpfs for /tmp: it would live in memory outside RLIMIT_AS, a second memory budget per conversion.
    if proc == SandboxProc.MOUNT:
        options += ["--proc", "/proc"]
    return [*options, "--dev", "/dev"]


def _policy_options(policy: bytes, opened: list[int]) -> list[str]:
    """bwrap options that put `policy` read-only over each ImageMagick policy file the host has, through a
    pipe (`--ro-bind-data`): no file of it lies where the run or another user could change it."""
    options: list[str] = []
    for path in imagemagick.POLICY_PATHS:
        if not Path(path).is_file():
            continue
        read_end, write_end = os.pipe()
        opened.append(read_end)
        try:
            # A policy is a few kilobytes, well under a pipe's buffer: the write never waits for bwrap.
            os.write(write_end, policy)
        finally:
            os.close(write_end)
        options += ["--ro-bind-data", str(read_end), path]
    return options


def _is_within(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _tmp_beside(bound: Path) -> Path:
    """The run's /tmp: a directory beside its working directory (inside the task's own temporary
    directory, which a killed worker leaves where its TMPDIR says), else in the system's."""
    try:
        return Path(tempfile.mkdtemp(prefix=scratch_prefix(".cortex-tmp-"), dir=bound.parent))
    except OSError:
        return Path(tempfile.mkdtemp(prefix=scratch_prefix(".cortex-tmp-"), dir=_staging_parent()))


def _staging_parent() -> Path:
    """Where a private working directory is copied for the sandbox user: the temp directory when that
    user can reach it, else the system's own (TMPDIR may point into a private directory)."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):  # noqa: S108 - world-passable, sticky
        if _reachable(Path(candidate)):
            return Path(candidate)
    raise PermissionError(f"no temporary directory the sandbox user {SANDBOX_UID} can reach; set TMPDIR to one")


def _reachable(directory: Path) -> bool:
    """Whether the sandbox user may pass through `directory` and all its parents (mode bits; no ACLs)."""
    for path in (directory, *directory.parents):
        try:
            info = os.stat(path)
        except OSError:
            return False
        if info.st_uid == SANDBOX_UID:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == SANDBOX_GID:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return False
    return True


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give `root` and everything below it to uid:gid, never following a link (the run may have made some)."""
    os.lchown(root, uid, gid)
    for directory, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.lchown(os.path.join(directory, name), uid, gid)


def _copy_back(staged: Path, work_dir: Path) -> None:
    """Bring what the run wrote back into `work_dir`: new or changed regular files and directories only.

    Links the run made are left behind: read on the host, they would point at the host's files."""
    for directory, dirs, files in os.walk(staged, followlinks=False):
        relative = Path(directory).relative_to(staged)
        target_dir = work_dir / relative
        if target_dir.is_symlink() or not target_dir.is_dir():
            dirs.clear()
            continue
        for name in list(dirs):
            source, target = Path(directory) / name, target_dir / name
            if source.is_symlink():
                dirs.remove(name)
            elif not target.exists() and not target.is_symlink():
                target.mkdir()
        for name in files:
            source, target = Path(directory) / name, target_dir / name
            info = os.lstat(source)
            if not stat.S_ISREG(info.st_mode) or target.is_symlink() or (target.exists() and not target.is_file()):
                continue
            if target.exists() and _same_file_content(info, os.stat(target)):
                continue
            shutil.copyfile(source, target, follow_symlinks=False)


def _same_file_content(left: os.stat_result, right: os.stat_result) -> bool:
    return (left.st_size, left.st_mtime_ns) == (right.st_size, right.st_mtime_ns)
