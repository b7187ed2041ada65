"""The worker's memory governor: it watches the machine's available memory (conversion.machine, which
counts the worker's memory cgroup when it runs inside one) and the resident size of each conversion
the worker runs. When available memory falls below the floor it stops the largest conversion (its log
gets `Fatal:infrastructure:governor …`, which the dispatcher answers with another attempt, on another
worker where one asks, rather than a fatal status) and holds back new tasks until memory is above the floor again.

One conversion is stopped at a time: the next is chosen only after the stopped one has ended, so that
the memory it gave back is seen first. Standard library only, like the rest of the worker."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

from conversion.engine import Watch
from conversion.machine import memory_available

logger = logging.getLogger(__name__)

CHECK_SECONDS = 0.25
_MB = 1024 * 1024


class Governor:
    def __init__(
        self, floor_mb: int, *, available: Callable[[], int] = memory_available, check_seconds: float = CHECK_SECONDS
    ) -> None:
        if floor_mb < 0 or check_seconds <= 0:
            raise ValueError("floor_mb must be 0 or more and check_seconds positive")
        self.floor = floor_mb * _MB
        self.available = available
        self.check_seconds = check_seconds
        self.last_available: int | None = None
        self.stops = 0  # conversions stopped so far
        self._watches: set[Watch] = set()
        self._stopping: Watch | None = None
        self._lock = threading.Lock()
        self._clear = threading.Event()  # set while new tasks may be taken
        self._clear.set()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.floor > 0

    @property
    def paused(self) -> bool:
        return not self._clear.is_set()

    @contextlib.contextmanager
    def watching(self) -> Iterator[Watch]:
        """A Watch for one conversion, known to the governor while the block runs."""
        watch = Watch()
        with self._lock:
            self._watches.add(watch)
        try:
            yield watch
        finally:
            with self._lock:
                self._watches.discard(watch)
                if self._stopping is watch:
                    self._stopping = None

    def wait_clear(self, stop: threading.Event) -> bool:
        """Wait until new tasks may be taken, or `stop` is set; True when they may."""
        while not self._clear.wait(CHECK_SECONDS):
            if stop.is_set():
                return False
        return not stop.is_set()

    def check(self) -> None:
        """One look at the machine: below the floor, stop the largest conversion (unless one stopped is
        still ending) and hold new tasks back; at or above it, let them come again."""
        if not self.enabled:
            return
        available = self.available()
        self.last_available = available
        if available >= self.floor:
            if self.paused:
                logger.info("governor: %d MB available again (floor %d MB); taking tasks", available // _MB,
                            self.floor // _MB)  # fmt: skip
            self._clear.set()
            return
        if not self.paused:
            logger.warning("governor: %d MB available, below the floor of %d MB; holding new tasks back",
                           available // _MB, self.floor // _MB)  # fmt: skip
        self._clear.clear()
        with self._lock:
            if self._stopping is not None or not self._watches:
                return
            largest = max(self._watches, key=lambda watch: watch.rss)
            self._stopping = largest
            running = len(self._watches)
        why = (
            f"the machine had {available // _MB} MB of memory available, below the floor of {self.floor // _MB} MB;"
            f" this conversion held {largest.rss // _MB} MB, the most of the {running} running"
        )
        logger.warning("governor: stopping a conversion: %s", why)
        largest.stop(why)
        self.stops += 1

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cortex-governor", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._halt.wait(self.check_seconds):
            try:
                self.check()
            except Exception:  # a failed read of /proc must not take the governor down for good
                logger.exception("governor: the check failed")
