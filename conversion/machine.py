"""What a worker machine has for conversions: its cores and the memory available to this process, from
/proc/meminfo and, when the worker runs inside a memory cgroup (v2 or v1), that group's limit less its
use. Standard library only, like the rest of the worker."""

from __future__ import annotations

import os
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")
# A cgroup v1 "no limit" is a page-rounded LONG_MAX; anything this large is no limit.
_UNLIMITED = 1 << 60


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_available(
    meminfo: Path = Path("/proc/meminfo"), cgroups: Path = Path("/proc/self/cgroup"), root: Path = _CGROUP_ROOT
) -> int:
    """Bytes this process can still use: the kernel's MemAvailable, or less when its cgroup's limit leaves
    less (`cgroups` says which groups it is in, below the cgroup file system mounted at `root`)."""
    available = _meminfo_available(meminfo)
    room = _cgroup_room(cgroups, root)
    return available if room is None else min(available, room)


def _meminfo_available(meminfo: Path) -> int:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise OSError(f"{meminfo} has no MemAvailable line")


def _cgroup_room(cgroups: Path, root: Path) -> int | None:
    """The memory cgroup's limit less its use, or None outside a limited one."""
    try:
        lines = cgroups.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":  # v2: the unified hierarchy
            files = (root / relative / "memory.max", root / relative / "memory.current")
        elif "memory" in controllers.split(","):
            group = root / "memory" / relative
            files = (group / "memory.limit_in_bytes", group / "memory.usage_in_bytes")
        else:
            continue
        try:
            limit_text, used_text = (file.read_text().strip() for file in files)
        except OSError:
            continue
        if limit_text == "max" or int(limit_text) >= _UNLIMITED:
            continue
        return max(0, int(limit_text) - int(used_text))
    return None


def concurrency_auto(memory_mb: int, *, cpus: int | None = None, available: int | None = None) -> int:
    """`--concurrency auto`: one conversion per core, as many as the available memory holds at
    `memory_mb` each, and at least one."""
    cpus = cores() if cpus is None else cpus
    available = memory_available() if available is None else available
    return max(1, min(cpus, available // (memory_mb * 1024 * 1024)))


def host_oom_kills(vmstat: Path = Path("/proc/vmstat")) -> int | None:
    """How many processes the kernel's OOM killer has ended on this host since it booted (every cgroup's
    and the host's own), or None where the kernel does not say (before Linux 4.13, or no /proc)."""
    try:
        text = vmstat.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return None
