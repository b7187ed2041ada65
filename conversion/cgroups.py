"""Exact caps for one conversion, from a cgroup of its own: `pids.max` holds its processes and threads
together to the process limit (a fork past it fails), and the memory controller holds all its processes
together to its memory budget (past it the kernel's OOM killer ends one of them); the group counts the CPU
time of all its processes (v2's cpu.stat; on v1 a cpuacct group beside them). Both cgroup versions are
served: v1 (a hierarchy per controller) and v2 (the unified one), each group made under the worker's own
group.

Making cgroups needs the right to write there (root, or a delegated subtree). Where they cannot be made,
`quota` gives None and the engine falls back to its watches (conversion.engine), which measure the same
limits every 50 ms. CONVERSION_CGROUPS=off turns the cgroups off. Standard library only."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
_SELF = Path("/proc/self/cgroup")
_REMOVE_SECONDS = 2.0
# A conversion's group is named ccs-conversion-<the pid of the process that made it>-<random>.
GROUP_PREFIX = "ccs-conversion-"
_problem: dict[str, str | None] = {}  # why cgroups cannot be made here, found once per process


@dataclass(frozen=True)
class Quota:
    """One conversion's cgroup(s): `pids` and `memory` are the group directories (the same one on v2); `cpu`
    the v1 cpuacct group that counts its CPU time, where that hierarchy is mounted (None on v2, where every
    group counts it)."""

    version: int
    pids: Path
    memory: Path
    cpu: Path | None = None

    def join_fds(self) -> list[int]:
        """Descriptors of the groups' cgroup.procs, opened before the fork: the child writes "0" to each
        between fork and exec (`join`), so nothing it starts is ever outside the groups."""
        groups = list(dict.fromkeys(group for group in (self.pids, self.memory, self.cpu) if group is not None))
        return [os.open(group / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for group in groups]

    @staticmethod
    def join(fds: list[int]) -> None:
        for fd in fds:
            os.write(fd, b"0")  # "0" is the writing process

    def processes(self) -> int:
        return int(_read(self.pids / "pids.current"))

    def memory_used(self) -> int:
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return int(_read(self.memory / name))

    def cpu_usec(self) -> int | None:
        """CPU time its processes used so far (user and system), in microseconds: v2's cpu.stat, which every
        group keeps, or v1's cpuacct.usage; None on v1 without a cpuacct hierarchy."""
        if self.version == 2:
            return _counter(self.pids / "cpu.stat", "usage_usec")
        return int(_read(self.cpu / "cpuacct.usage")) // 1000 if self.cpu is not None else None

    def refused_forks(self) -> int:
        """Forks refused at pids.max so far."""
        return _counter(self.pids / "pids.events", "max")

    def oom_kills(self) -> int:
        """Processes the OOM killer ended in the group at its memory limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return _counter(self.memory / name, "oom_kill")


def enabled() -> bool:
    return os.environ.get("CONVERSION_CGROUPS", "auto").strip().lower() not in ("off", "0", "no", "false")


def problem() -> str | None:
    """Why no cgroup can be made for a conversion here (None when one can): a group is made and removed."""
    if not enabled():
        return "turned off (CONVERSION_CGROUPS=off)"
    if "why" not in _problem:
        try:
            with quota(max_processes=8, memory_bytes=64 * 1024 * 1024, probe=True):
                pass
            _problem["why"] = None
            _sweep()
        except OSError as exc:
            _problem["why"] = f"cannot make a cgroup: {exc}"
    return _problem["why"]


@contextlib.contextmanager
def quota(*, max_processes: int, memory_bytes: int, probe: bool = False) -> Iterator[Quota | None]:
    """A fresh cgroup (v1: one per controller) capped at `max_processes` and `memory_bytes`, removed after
    the block; None where cgroups cannot be made (then the engine watches instead)."""
    if not probe and problem() is not None:
        yield None
        return
    made: list[Path] = []
    try:
        name = f"{GROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        found = _hierarchy()
        if found is None:
            raise OSError(errno.ENOENT, "no cgroup hierarchy with the pids and memory controllers is mounted")
        version, pids_parent, memory_parent = found
        cpu_parent = _cpuacct_parent() if version == 1 else None
        if version == 2:
            group = pids_parent / name
            group.mkdir()
            made.append(group)
            _write(group / "pids.max", str(max_processes))
            _write(group / "memory.max", str(memory_bytes))
            with contextlib.suppress(OSError):  # without swap accounting there is no such file
                _write(group / "memory.swap.max", "0")
            result = Quota(2, group, group)
        else:
            pids, memory = pids_parent / name, memory_parent / name
            pids.mkdir()
            made.append(pids)
            memory.mkdir()
            made.append(memory)
            _write(pids / "pids.max", str(max_processes))
            _write(memory / "memory.limit_in_bytes", str(memory_bytes))
            cpu = None
            if cpu_parent is not None:
                cpu = cpu_parent / name
                cpu.mkdir()
                made.append(cpu)
            result = Quota(1, pids, memory, cpu)
    except OSError:
        _remove(made)
        raise
    try:
        yield result
    finally:
        _remove(made)


def _sweep() -> None:
    """Remove the groups that processes killed outright left behind (a killed worker cannot remove its
    conversions' groups): those named after a process that is gone. Their processes went with the worker
    (they die with it), so the groups are empty; one that is not stays."""
    found = _hierarchy()
    if found is None:
        return
    parents = {found[1], found[2]}
    if found[0] == 1 and (cpuacct := _cpuacct_parent()) is not None:
        parents.add(cpuacct)
    for parent in parents:
        for group in parent.glob(f"{GROUP_PREFIX}*"):
            pid = group.name.removeprefix(GROUP_PREFIX).split("-", 1)[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    group.rmdir()


def _hierarchy() -> tuple[int, Path, Path] | None:
    """(version, the pids parent, the memory parent): this process's own groups, where the new ones go."""
    own: dict[str, str] = {}
    for line in _SELF.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path.lstrip("/")
    if "pids" in own and "memory" in own and (ROOT / "pids").is_dir() and (ROOT / "memory").is_dir():
        return 1, ROOT / "pids" / own["pids"], ROOT / "memory" / own["memory"]
    if "" in own and (ROOT / "cgroup.controllers").exists():
        parent = ROOT / own[""]
        wanted = {"pids", "memory"}
        if not wanted <= set(_read(parent / "cgroup.controllers").split()):
            return None
        if not wanted <= set(_read(parent / "cgroup.subtree_control").split()):
            # Refused (EBUSY) where the parent holds processes and is not the root: the no-internal-process rule.
            _write(parent / "cgroup.subtree_control", "+pids +memory")
        return 2, parent, parent
    return None


def _cpuacct_parent() -> Path | None:
    """This process's own v1 cpuacct group, where a conversion's goes, or None without that hierarchy."""
    for line in _SELF.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(",") and (ROOT / "cpuacct").is_dir():
            return ROOT / "cpuacct" / path.lstrip("/")
    return None


def _remove(groups: list[Path]) -> None:
    """Remove the groups, once the processes in them have gone (they were killed just before)."""
    for group in reversed(groups):
        deadline = time.monotonic() + _REMOVE_SECONDS
        while True:
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    logger.warning("cannot remove the conversion's cgroup %s: %s", group, exc)
                    break
                time.sleep(0.01)


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _counter(path: Path, key: str) -> int:
    for line in _read(path).splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0
