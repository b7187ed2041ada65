"""A small process supervisor for `manage.py up`: start children in order, restart the ones that
die, and on Ctrl-C or SIGTERM stop them all (each in its own process group) so nothing is left."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from config.logsink import PROCESS_ENV
from conversion.processes import die_with_parent

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 20
_MAX_RESTARTS_PER_MINUTE = 5


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    restart: bool = True
    # Needs the database and Redis: one that exits while either does not answer is restarted once both do.
    needs_servers: bool = True
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None


class Supervisor:
    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stopping = False
        # Why the supervisor gave up (a child that died for good), so `up` can exit non-zero; None on a stop.
        self.failure: str | None = None

    def start(self, child: Child) -> Child:
        logger.info("starting %s: %s", child.name, " ".join(child.argv))
        child.process = subprocess.Popen(
            child.argv, env={**child.env, PROCESS_ENV: child.name}, start_new_session=True, preexec_fn=die_with_parent
        )
        if child not in self.children:
            self.children.append(child)
        return child

    def install_signal_handlers(self) -> None:
        def request_stop(signum: int, frame: object) -> None:
            if not self.stopping:
                logger.info("received %s; stopping", signal.Signals(signum).name)
            self.stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGHUP, request_stop)

    def watch(
        self, tick: Callable[[], None] | None = None, servers_down: Callable[[], str | None] | None = None
    ) -> None:
        """Block until asked to stop, restarting children that exit (with a limit on flapping).

        A child that needs the servers and exits while `servers_down()` names one that does not answer (the
        database or Redis away) waits for it, and that restart is not counted: dying of an outage is not
        flapping, and an outage longer than the limit would otherwise stop everything."""
        waiting: set[str] = set()  # children held until the servers answer
        while not self.stopping:
            down: str | None = None
            asked = False
            for child in self.children:
                code = child.process.poll() if child.process else None
                if code is None or self.stopping:
                    continue
                if servers_down is not None and child.needs_servers and child.restart:
                    if not asked:
                        down, asked = servers_down(), True
                    if down is not None:
                        if child.name not in waiting:
                            logger.warning("%s exited with %s; %s: restarting it once it does", child.name, code, down)
                            waiting.add(child.name)
                        continue
                if child.name in waiting:
                    waiting.discard(child.name)
                    logger.warning("restarting %s: the servers answer again", child.name)
                    self.start(child)
                    continue
                now = time.monotonic()
                child.restarts = [t for t in child.restarts if now - t < 60]
                if not child.restart or len(child.restarts) >= _MAX_RESTARTS_PER_MINUTE:
                    why = "it is not restarted" if not child.restart else f"{len(child.restarts)} restarts in a minute"
                    self.failure = f"{child.name} exited with {code} ({why}); everything was stopped"
                    logger.error("%s", self.failure)
                    self.stopping = True
                    break
                logger.warning("%s exited with %s; restarting", child.name, code)
                child.restarts.append(now)
                self.start(child)
            if tick:
                tick()
            time.sleep(0.5)

    def stop_all(self) -> None:
        """SIGTERM every child's process group, newest first; SIGKILL what is left after the grace."""
        self.stopping = True
        for child in reversed(self.children):
            _signal_group(child, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            while child.process and child.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            _signal_group(child, signal.SIGKILL)  # stragglers in the group (e.g. pool children)
            if child.process:
                child.process.wait()
            logger.info("stopped %s", child.name)


def _signal_group(child: Child, sig: int) -> None:
    if child.process is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.process.pid, sig)
