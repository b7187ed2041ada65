"""A conversion's own cgroup (conversion.cgroups): its processes and threads cannot pass the process
limit at any moment, all its processes together cannot pass its memory budget, the group is gone after
the run, and where cgroups are off the engine's watches hold the same limits. Real bwrap sandbox, real
cgroups (the tests run as root on a machine with the pids and memory controllers, as CI does)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import psutil
import pytest

from conversion import cgroups
from conversion.engine import DISK_WRITE_BYTES_PER_SECOND, LIMIT_CHECK_SECONDS, convert
from conversion.sandbox import Sandbox
from tests.support import write_tex

BWRAP = Sandbox()


@pytest.fixture(autouse=True)
def cgroups_here():
    why = cgroups.problem()
    assert why is None, f"these tests need cgroups with the pids and memory controllers: {why}"


def _stand_in(tmp_path: Path, body: str) -> str:
    script = tmp_path / "stand-in-latexmlc"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_tex(tmp_path / "work" / "doc.tex")
    return str(script)


class PeakCount:
    """The most processes below this one at any sample (every 5 ms) while a run goes on."""

    def __init__(self) -> None:
        self.before = {child.pid for child in psutil.Process().children(recursive=True)}
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self.stop.is_set():
            count = sum(1 for child in me.children(recursive=True) if child.pid not in self.before)
            self.peak = max(self.peak, count)
            self.stop.wait(0.005)

    def __enter__(self) -> PeakCount:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _groups_left() -> list[str]:
    """The groups this process made that are still there (other processes' conversions may run meanwhile)."""
    found = []
    for root in (cgroups.ROOT / "pids", cgroups.ROOT / "memory", cgroups.ROOT):
        if root.is_dir():
            found += [str(path) for path in root.rglob(f"{cgroups.GROUP_PREFIX}{os.getpid()}-*")]
    return found


def test_a_fork_loop_never_has_more_processes_than_the_limit_and_its_group_is_removed(tmp_path):
    latexmlc = _stand_in(tmp_path, "while true; do sleep 600 & done")
    with PeakCount() as count:
        conversion = convert(tmp_path / "work", "doc.tex", timeout=60, max_processes=30, latexmlc=latexmlc,
                             sandbox=BWRAP)  # fmt: skip
    assert (conversion.status_code, conversion.killed) == (3, "processes")
    assert b"Fatal:limit:processes the conversion tried to run more than its limit of 30 processes" in conversion.log
    # Killed for "processes" only once a fork was refused at pids.max: it reached the cap. Counted from
    # outside meanwhile (the Popen'd bwrap and all below it, bwrap's own two in the group), never more.
    # tests/conversion/test_hostile.py counts a fork bomb's processes exactly, from inside.
    assert count.peak <= 30, count.peak
    assert _groups_left() == []


def test_processes_that_each_keep_within_the_memory_limit_cannot_pass_it_together(tmp_path):
    """Four processes of 120 MB each, each far under its own RLIMIT_AS of 300 MB; 480 MB together."""
    hold = "python3 -c 'import time; b = b\"x\" * (120 << 20); time.sleep(60)'"
    latexmlc = _stand_in(tmp_path, f"for i in 1 2 3 4; do {hold} & done\nwait\necho Status:conversion:0 > cortex.log")
    conversion = convert(tmp_path / "work", "doc.tex", timeout=60, memory_mb=300, latexmlc=latexmlc, sandbox=BWRAP)
    assert (conversion.status_code, conversion.killed) == (3, "memory")
    assert (
        b"Fatal:perl:out_of_memory the conversion's processes together passed its memory limit of 300 MB"
        in conversion.log
    )
    assert conversion.runtime_ms < 30_000  # ended by the kernel, not by the timeout
    assert _groups_left() == []


def test_with_cgroups_off_the_watches_hold_the_process_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVERSION_CGROUPS", "off")
    assert cgroups.problem() == "turned off (CONVERSION_CGROUPS=off)"
    latexmlc = _stand_in(tmp_path, "while true; do sleep 600 & done")
    conversion = convert(tmp_path / "work", "doc.tex", timeout=60, max_processes=30, latexmlc=latexmlc, sandbox=BWRAP)
    assert (conversion.status_code, conversion.killed) == (3, "processes")


def test_with_a_cgroup_a_large_disk_limit_is_still_held_closely_though_checked_rarely(tmp_path):
    """With a cgroup the disk is checked as rarely as every quarter second at a 600 MB limit, closer
    together as a writer nears it (conversion.engine.check_interval): 1 MB files written as fast as the
    disk takes them still stop close to the limit. Near it the checks are LIMIT_CHECK_SECONDS apart, in
    which a writer at DISK_WRITE_BYTES_PER_SECOND writes 102 MB: the bound. Checked a quarter second apart
    all the way, the same writer would pass the limit by up to 512 MB."""
    latexmlc = _stand_in(tmp_path, "head -c 5000000000 /dev/zero | split -b 1048576 -a 5 - fill")
    conversion = convert(tmp_path / "work", "doc.tex", timeout=60, disk_mb=600, latexmlc=latexmlc, sandbox=BWRAP)
    assert (conversion.status_code, conversion.killed) == (3, "disk")
    written = len(list((tmp_path / "work").glob("fill*")))
    overshoot_mb = DISK_WRITE_BYTES_PER_SECOND * LIMIT_CHECK_SECONDS / 2**20
    assert 600 <= written <= 600 + overshoot_mb, written


def test_the_group_counts_the_cpu_time_the_sandbox_never_hands_back(tmp_path):
    """A stand-in that burns CPU in a child shell inside the sandbox: bwrap exits without waiting for the
    sandbox's init, so no rusage reaches the engine; only the group (v2's cpu.stat, v1's cpuacct group)
    sees that time (the run is unwatched: no tree measurement either)."""
    burn = "sh -c 'i=0; while [ \"$i\" -lt 200000 ]; do i=$((i+1)); done'"
    engine = _stand_in(tmp_path, f'{burn}\necho "Status:conversion:0" > cortex.log')
    with cgroups.quota(max_processes=16, memory_bytes=256 * 1024 * 1024) as quota:
        assert quota is not None and quota.cpu_usec() == 0
    conversion = convert(tmp_path / "work", "doc.tex", latexmlc=engine, timeout=60, sandbox=BWRAP)
    assert conversion.status_code == 0
    assert conversion.cpu_ms is not None and conversion.cpu_ms >= 100, conversion.cpu_ms
    assert f"\nInfo:cpu_ms:{conversion.cpu_ms}\n".encode() in conversion.log
