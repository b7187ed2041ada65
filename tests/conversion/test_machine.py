"""What a worker machine has: cores and available memory, inside a memory cgroup (v2 or v1) or not, and
the `--concurrency auto` they give."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conversion.machine import concurrency_auto, cores, host_oom_kills, memory_available
from tests.support import PROJECT_DIR

GIB = 1024**3
MEMINFO = "MemTotal:       25165824 kB\nMemFree:         1000000 kB\nMemAvailable:   20971520 kB\n"  # 20 GiB


def _files(tmp_path: Path, cgroup: str, groups: dict[str, str]) -> dict[str, Path]:
    (tmp_path / "meminfo").write_text(MEMINFO)
    (tmp_path / "cgroup").write_text(cgroup)
    for relative, text in groups.items():
        (tmp_path / "fs" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / relative).write_text(text)
    return {"meminfo": tmp_path / "meminfo", "cgroups": tmp_path / "cgroup", "root": tmp_path / "fs"}


def test_outside_a_limited_cgroup_the_available_memory_is_the_kernels(tmp_path):
    paths = _files(tmp_path, "0::/worker\n", {"worker/memory.max": "max\n", "worker/memory.current": "1\n"})
    assert memory_available(**paths) == 20 * GIB


def test_a_cgroup_v2_limit_leaves_its_limit_less_its_use(tmp_path):
    groups = {"worker/memory.max": f"{4 * GIB}\n", "worker/memory.current": f"{GIB}\n"}
    assert memory_available(**_files(tmp_path, "0::/worker\n", groups)) == 3 * GIB


def test_a_cgroup_v1_limit_leaves_its_limit_less_its_use(tmp_path):
    cgroup = "8:pids:/\n4:memory:/jobs/worker\n0::/\n"
    groups = {
        "memory/jobs/worker/memory.limit_in_bytes": f"{6 * GIB}\n",
        "memory/jobs/worker/memory.usage_in_bytes": f"{2 * GIB}\n",
    }
    assert memory_available(**_files(tmp_path, cgroup, groups)) == 4 * GIB


def test_a_cgroup_limit_above_what_the_kernel_has_changes_nothing(tmp_path):
    groups = {"worker/memory.max": f"{64 * GIB}\n", "worker/memory.current": "0\n"}
    assert memory_available(**_files(tmp_path, "0::/worker\n", groups)) == 20 * GIB


def test_this_machine_reports_cores_and_memory_it_has():
    total = int(
        next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")).split()[1]
    )
    assert 0 < memory_available() <= total * 1024
    assert cores() >= 1


@pytest.mark.parametrize(
    ("cpus", "available", "memory_mb", "expected"),
    [(8, 10 * GIB, 4096, 2), (2, 100 * GIB, 4096, 2), (4, GIB, 4096, 1), (16, 64 * GIB, 2048, 16)],
)
def test_concurrency_auto_is_one_per_core_as_far_as_memory_goes(cpus, available, memory_mb, expected):
    assert concurrency_auto(memory_mb, cpus=cpus, available=available) == expected


def test_the_worker_command_line_takes_auto_or_a_positive_number():
    for bad in ("0", "-1", "many"):
        result = subprocess.run(
            [sys.executable, "-m", "conversion.worker", "--ventilator", "tcp://127.0.0.1:1", "--sink",
             "tcp://127.0.0.1:2", "--service", "s", "--concurrency", bad],
            cwd=PROJECT_DIR, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert result.returncode == 2 and "a positive number or auto" in result.stderr, result.stderr


def test_the_host_s_oom_kill_count_is_read_from_vmstat_and_is_none_where_the_kernel_says_nothing(tmp_path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("pgfault 123\noom_kill 7\nthp_fault_alloc 0\n")
    assert host_oom_kills(vmstat) == 7
    vmstat.write_text("pgfault 123\n")
    assert host_oom_kills(vmstat) is None
    assert host_oom_kills(tmp_path / "absent") is None
    assert isinstance(host_oom_kills(), int)  # this machine's kernel (4.13 or later) counts them
