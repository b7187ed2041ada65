"""The embedded PostgreSQL stops when its last holder exits, even after an earlier holder was killed (a killed
process never lets go of its handle itself: config.embedded.handles_prune forgets it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from config import embedded
from tests.support import PROJECT_DIR, wait_until

# A command holding the embedded server of the data directory it is given, as `up` or any manage.py command does.
HOLD = "import sys, time; from pathlib import Path; from config.embedded import database_url; "
HOLD += "database_url(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)"
USE = "import sys; from pathlib import Path; from config.embedded import database_url; database_url(Path(sys.argv[1]))"


def test_the_embedded_database_stops_with_its_last_holder_though_an_earlier_holder_was_killed(tmp_path):
    var = tmp_path / "var"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_DIR)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(var)], cwd=PROJECT_DIR, env=env)
    try:
        handles = var / "pgdata" / ".handle_pids.json"
        wait_until(
            lambda: handles.exists() and str(holder.pid) in handles.read_text(), 60,
            message="the holder to start the server",
        )  # fmt: skip
        assert embedded.database_running(var)
        holder.kill()  # no atexit: its pid stays in pgserver's list of handles
        holder.wait(10)
        assert embedded.database_running(var), "a killed holder stopped the server: the test proves nothing"

        subprocess.run([sys.executable, "-c", USE, str(var)], cwd=PROJECT_DIR, env=env, check=True, timeout=120)
        wait_until(lambda: not embedded.database_running(var), 30, message="the last holder's exit to stop the server")
        assert str(holder.pid) not in handles.read_text()
    finally:
        holder.kill()
        holder.wait(10)
        pid = embedded.postmaster_pid(var)
        if pid is not None and embedded.database_running(var):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # a fast shutdown, so the test leaves no server behind
            wait_until(lambda: not embedded.database_running(var), 60, message="the server left running to stop")
