"""The limit on running `/convert` conversions, shared by every web process of the machine.

A slot is a file `VAR_DIR/run/convert-slots/slot-N` (N < CONVERT_CONCURRENCY) held with an exclusive
`flock` for as long as a conversion runs. The kernel drops a flock when the last descriptor of its
open file is closed, which includes the death of the holding process, so a killed web worker never
leaks a slot. Each take opens the file anew: flock belongs to the open file, so two threads of one
process exclude each other like two processes do.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from django.conf import settings


class ConvertSlot:
    """One held slot; `release()` frees it (closing the descriptor drops the lock)."""

    def __init__(self, fd: int, number: int) -> None:
        self._fd: int | None = fd
        self.number = number

    def release(self) -> None:
        """Free the slot; a second call does nothing."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def convert_slots_dir() -> Path:
    return settings.VAR_DIR / "run" / "convert-slots"


def warm_slots_dir() -> Path:
    """The slots of requests to the warm engine (CONVERT_WARM_CONCURRENCY of them)."""
    return settings.VAR_DIR / "run" / "convert-warm-slots"


def convert_slot_take(
    *, warm: bool = False, limit: int | None = None, directory: Path | None = None
) -> ConvertSlot | None:
    """A free slot out of `limit` (CONVERT_CONCURRENCY, or CONVERT_WARM_CONCURRENCY for a `warm` one, in
    warm_slots_dir), taken at once, or None when all are busy."""
    if warm:
        limit = settings.CONVERT_WARM_CONCURRENCY if limit is None else limit
        directory = warm_slots_dir() if directory is None else directory
    limit = settings.CONVERT_CONCURRENCY if limit is None else limit
    directory = convert_slots_dir() if directory is None else directory
    directory.mkdir(parents=True, exist_ok=True)
    for number in range(limit):
        # O_CLOEXEC: a latexmlc started meanwhile must not inherit the descriptor and with it the lock.
        fd = os.open(directory / f"slot-{number}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        return ConvertSlot(fd, number)
    return None


def convert_slots_busy(*, limit: int | None = None, directory: Path | None = None) -> int:
    """How many of the slots are held right now, read from /proc/locks without touching them."""
    limit = settings.CONVERT_CONCURRENCY if limit is None else limit
    directory = convert_slots_dir() if directory is None else directory
    inodes = set()
    for number in range(limit):
        with contextlib.suppress(FileNotFoundError):
            stat = (directory / f"slot-{number}").stat()
            inodes.add(f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}")
    held = set()
    # A line: "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters ("->") hold nothing.
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] in inodes:
            held.add(fields[5])
    return len(held)
