"""CPU time the hypervisor gave to other guests while this VM wanted it ("steal" in /proc/stat).

On this shared VM the same code measured up to twice as slow at times, with no other process using
the CPU; steal explains it (21-26% of all CPU time, seen during such a phase). Each benchmark prints
it beside its results, so a slow number can be told from a slow machine."""

from __future__ import annotations

import time
from dataclasses import dataclass


def cpu_ticks() -> tuple[list[int], int]:
    """The machine's CPU ticks so far, from the first line of /proc/stat (user, nice, system, idle,
    iowait, irq, softirq, steal, ...), and of them the steal (0 where the kernel does not count it)."""
    with open("/proc/stat") as handle:
        values = [int(value) for value in handle.readline().split()[1:]]
    return values, values[7] if len(values) > 7 else 0


def _ticks() -> tuple[int, int]:
    """(steal, total) CPU ticks of the machine so far."""
    values, steal = cpu_ticks()
    return steal, sum(values)


@dataclass
class StealWatch:
    before: tuple[int, int] = (0, 0)

    def start(self) -> StealWatch:
        self.before = _ticks()
        return self

    def share(self) -> float:
        """The fraction of all CPU time since start() that the hypervisor took."""
        steal, total = _ticks()
        elapsed = total - self.before[1]
        return (steal - self.before[0]) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        return f"the hypervisor took {100 * self.share():.0f}% of the CPU time meanwhile (steal)"


# A measured step waits until the hypervisor takes at most STEAL_QUIET of the CPU time (over a probe of a
# few seconds), and one during which it took more than STEAL_DISTURBED is measured again, as a step
# disturbed by another benchmark is.
STEAL_QUIET = 0.10
STEAL_DISTURBED = 0.15


def steal_settle(max_share: float = STEAL_QUIET, *, probe: float = 3.0, timeout: float = 900.0) -> tuple[float, float]:
    """Wait until the steal over one `probe` window is at most `max_share` (or `timeout` passed);
    returns (seconds waited, the last window's share)."""
    began = time.monotonic()
    while True:
        watch = StealWatch().start()
        time.sleep(probe)
        share = watch.share()
        if share <= max_share or time.monotonic() - began > timeout:
            return time.monotonic() - began - probe, share
