"""`manage.py up` as an operator runs it: embedded PostgreSQL and Redis, first token, a second start
that reuses the data, commands beside it sharing its servers, and nothing left after SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support import PROJECT_DIR, free_port

pytestmark = pytest.mark.slow


def _embedded_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1")
    return env


class Up:
    """A running `manage.py up` whose output lines are collected as they come."""

    def __init__(self, var_dir: Path, port: int) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port), "--web-processes", "1",
             "--job-concurrency", "1"],
            cwd=PROJECT_DIR, env=_embedded_env(var_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, prefix: str, timeout: float = 90) -> str:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting {prefix!r}; output was:\n" + "\n".join(self.seen[-60:]))

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


def _get(url: str, token: str | None = None) -> tuple[int, dict]:
    """GET a JSON endpoint; a refused connection is retried for a few seconds (a loaded machine may be
    between a child's restart and its first accept)."""
    import time

    request = urllib.request.Request(url, headers={"X-Service-Token": token} if token else {})  # noqa: S310
    for attempt in range(10):
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except urllib.error.URLError:
            if attempt == 9:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def _wait(predicate, timeout: float, message: str):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {message}")


def _gone(pid: int, timeout: float = 15) -> bool:
    """True once the process has exited (a zombie awaiting its reaper counts as exited)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def _postmaster_pid(var_dir: Path) -> int | None:
    pid_file = var_dir / "pgdata" / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


def test_up_runs_the_whole_system_on_embedded_servers_and_stops_cleanly(tmp_path):
    var_dir = Path("/tmp") / f"ccs-up-{os.getpid()}"  # short: unix socket paths are limited
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        up = Up(var_dir, port)
        token = up.wait_for("TOKEN=").split("=", 1)[1]
        up.wait_for("BASE_URL=")
        healthy = {"status": "ok", "database": {"reachable": True}, "conversion_sandbox": "bwrap"}
        assert _get(f"{base}/healthz") == (200, healthy)
        assert _get(f"{base}/api/jobs")[0] == 401
        assert _get(f"{base}/api/jobs", token)[0] == 200

        # A command run beside `up`, with no settings, uses the same embedded servers.
        other = subprocess.run(
            [sys.executable, "manage.py", "create_token", "bob"],
            cwd=PROJECT_DIR, env=_embedded_env(var_dir), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert _get(f"{base}/api/jobs", other.stdout.strip())[0] == 200

        # The demo corpus was loaded on the first start and real LaTeXML workers convert it.
        def demo_counts() -> dict | None:
            status, body = _get(f"{base}/api/corpora/demo")
            if status != 200:
                return None
            counts = next((s["counts"] for s in body["services"] if s["name"] == "tex_to_html"), None)
            return counts if counts and counts["no_problem"] + counts["warning"] + counts["error"] >= 3 else None

        counts = _wait(demo_counts, 150, "the demo corpus to convert")
        assert counts["total"] == 6  # seven entries, one of them invalid at import

        children = up.descendants()
        postgres = _postmaster_pid(var_dir)
        names = " ".join(" ".join(child.cmdline()) for child in children)
        for part in ("gunicorn", "celery", "beat", "redis-server", "dispatcher", "worker --service tex_to_html"):
            assert part in names, part
        everything = children + [
            p for p in psutil.process_iter(["cmdline"]) if "latexml" in " ".join(p.info["cmdline"] or [])
        ]
        assert up.stop() == 0
        assert not [child for child in everything if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
        assert postgres is not None and _gone(postgres)

        # A second start reuses the data: no new token, the old one still works.
        again = Up(var_dir, port)
        again.wait_for("BASE_URL=")
        assert not any(line.startswith("TOKEN=") for line in again.seen)
        assert _get(f"{base}/api/jobs", token)[0] == 200
        assert again.stop() == 0
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            if str(var_dir) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        subprocess.run(["rm", "-rf", str(var_dir)], check=False)


def _run_command(*argv: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=PROJECT_DIR, env=full_env, capture_output=True, text=True, timeout=60
    )


def test_a_bad_setting_stops_start_up_with_one_line_naming_it():
    result = _run_command("check", DEBUG="yes", DATABASE_URL="postgresql://postgres@127.0.0.1:1/x")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == "configuration error: DEBUG must be true or false, not 'yes'"


def test_up_refuses_no_more_web_threads_than_conversions_as_they_could_take_them_all(tmp_path):
    result = _run_command(
        "up", "--port", str(free_port()), "--web-threads", "2", CONVERT_CONCURRENCY="2", VAR_DIR=str(tmp_path),
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/ccs", REDIS_URL="x",
    )  # fmt: skip
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "--web-threads 2 must be more than CONVERT_CONCURRENCY (2)" in result.stderr


def test_up_says_in_one_line_when_the_database_does_not_answer():
    closed = free_port()
    result = _run_command(
        "up", "--port", str(free_port()), DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed}/ccs", REDIS_URL="x"
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"PostgreSQL at 127.0.0.1:{closed}/ccs does not answer" in result.stderr
