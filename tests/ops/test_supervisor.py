"""The supervisor of `manage.py up`, with real child processes."""

from __future__ import annotations

import os
import sys
import time

from ops.supervisor import Child, Supervisor


def test_a_child_that_exits_while_a_server_is_down_waits_for_it_and_that_restart_is_not_counted(tmp_path):
    starts = tmp_path / "starts"
    # Exits at once the first time (as a process does whose database went away), stays up after.
    program = (
        "import pathlib, sys, time\n"
        f"starts = pathlib.Path({str(starts)!r})\n"
        "first = not starts.exists()\n"
        "starts.write_text(starts.read_text() + 'x' if starts.exists() else 'x')\n"
        "sys.exit(1) if first else time.sleep(60)\n"
    )
    child = Child("flaky", [sys.executable, "-c", program], dict(os.environ))
    supervisor = Supervisor()
    supervisor.start(child)
    down: list[str | None] = ["PostgreSQL does not answer: the test says so"]
    seen = {"rounds_down_after_exit": 0, "starts_while_down": set()}

    def tick() -> None:
        if down[0] is not None:
            if child.process.poll() is not None:
                seen["rounds_down_after_exit"] += 1
                seen["starts_while_down"].add(starts.read_text())
            if seen["rounds_down_after_exit"] >= 4:
                down[0] = None  # the server answers again
        elif starts.exists() and starts.read_text() == "xx" and child.process.poll() is None:
            supervisor.stopping = True
        if supervisor.failure or time.monotonic() > deadline:
            supervisor.stopping = True

    deadline = time.monotonic() + 60

    try:
        supervisor.watch(tick=tick, servers_down=lambda: down[0])
    finally:
        supervisor.stop_all()
    assert seen["starts_while_down"] == {"x"}  # not restarted while the server was down
    assert starts.read_text() == "xx"  # restarted once it answered
    assert child.restarts == []  # and that restart was not counted against the limit
    assert supervisor.failure is None
