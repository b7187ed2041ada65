"""`manage.py up`'s start-up as an operator meets it: its ports checked before anything is made (a listener
refused, a connection in TIME-WAIT waited out), its closing lines (the URL, the first token) last and no access
log unless asked, and its web server given the passkey origin of its own port."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from ops.stack import web_child
from tests.ops.test_up import Up, _free_ports, _ports
from tests.support import PROJECT_DIR, free_port

pytestmark = pytest.mark.slow


def _up(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """`manage.py up` on its embedded servers (no DATABASE_URL, no REDIS_URL) unless `env` names them."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "up", *argv], cwd=PROJECT_DIR, env=full_env, capture_output=True, text=True,
        timeout=150,
    )  # fmt: skip


def test_up_refuses_a_busy_port_before_it_makes_its_database(tmp_path):
    """A second `up` (another checkout) on a port in use: refused in one line, and no embedded PostgreSQL data
    made for it."""
    var_dir = tmp_path / "var"
    web, dispatcher = _ports()
    with socket.socket() as holder:  # the first `up`'s web server, say
        holder.bind(("127.0.0.1", web))
        holder.listen()
        result = _up("--port", str(web), VAR_DIR=str(var_dir), **dispatcher)
    assert result.returncode != 0
    assert not (var_dir / "pgdata").exists()
    assert result.stderr.strip() == (  # the one line, nothing of an embedded PostgreSQL started
        f"CommandError: port {web} for the web server (--port) on 127.0.0.1 is not free (Address already in use):"
        " stop what holds it or choose another port"
    )


def _time_wait(port: int) -> None:
    """Leave `port` in TIME-WAIT as another program's outgoing connection does: a client socket on that port
    (bound as the kernel binds an ephemeral port, without SO_REUSEADDR) that closes first."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.socket()
        client.bind(("127.0.0.1", port))
        client.connect(server.getsockname())
        accepted, _ = server.accept()
        client.close()  # the active close: the client's side enters TIME-WAIT
        accepted.recv(1)  # its FIN
        accepted.close()
    assert "TIME_WAIT" in {conn.status for conn in psutil.net_connections(kind="tcp") if conn.laddr.port == port}


def test_a_port_held_by_a_connection_in_time_wait_is_waited_out_with_a_line_saying_so():
    """No listener holds the sink's port, a closed connection does (for 60 s, in TIME-WAIT): `up` waits, says so
    and how to reserve the port, and goes on once it is free (here to the database, which does not answer); with
    a bound shorter than the TIME-WAIT the check gives up saying the same."""
    web, ventilator, sink = _free_ports(3)
    reserve = ",".join(str(port) for port in sorted((ventilator, sink)))
    _time_wait(sink)
    closed = free_port()
    started = time.monotonic()
    result = _up(
        "--port", str(web), DISPATCHER_VENTILATOR_PORT=str(ventilator), DISPATCHER_SINK_PORT=str(sink),
        DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed}/ccs", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
    )  # fmt: skip
    assert "not free" not in result.stderr
    assert result.stdout.startswith(
        f"Port {sink} for the dispatcher sink (DISPATCHER_SINK_PORT) is held by a connection (TIME_WAIT), not a"
        " listener: another program's connection used it as its own port. Waiting up to 65 s for it to close. To"
        f" prevent it: sysctl -w net.ipv4.ip_local_reserved_ports={reserve} keeps other programs'"
        " connections off them (docs/deploy.md#ports)."
    ), result.stdout
    assert f"PostgreSQL at 127.0.0.1:{closed}/ccs does not answer" in result.stderr  # past the ports
    assert time.monotonic() - started < 90

    from config.ports import PortTaken, ports_check, wanted

    _time_wait(sink)
    said: list[str] = []
    with pytest.raises(PortTaken) as refused:
        ports_check(
            wanted(web_host="127.0.0.1", web_port=web, bind="127.0.0.1", ventilator=ventilator, sink=sink),
            wait=1,
            say=said.append,
        )
    assert str(refused.value) == (
        f"port {sink} for the dispatcher sink (DISPATCHER_SINK_PORT) on 127.0.0.1 is still held by a connection"
        f" (TIME_WAIT) after 1 s: choose another port, or sysctl -w net.ipv4.ip_local_reserved_ports={reserve} keeps"
        " other programs' connections off them"
    )
    assert len(said) == 1


def test_a_listener_is_refused_at_once_not_waited_for():
    from config.ports import PortTaken, ports_check, wanted

    web, ventilator, sink = _free_ports(3)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ventilator))
        holder.listen()
        started = time.monotonic()
        with pytest.raises(PortTaken, match=f"port {ventilator} for the dispatcher ventilator .* is not free"):
            ports_check(wanted(web_host="127.0.0.1", web_port=web, bind="127.0.0.1", ventilator=ventilator, sink=sink))
    assert time.monotonic() - started < 5


def _quiet(up: Up, seconds: float) -> list[str]:
    """The lines `up` prints within the next `seconds` (none while it idles)."""
    deadline = time.monotonic() + seconds
    lines = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            lines.append(up.lines.get(timeout=left))
        except queue.Empty:
            break
    return lines


@pytest.mark.django_db(transaction=True)  # `up` writes to the test database from its own processes
def test_start_up_ends_with_the_url_and_the_first_token_and_requests_log_nothing_here(tmp_path):
    from tests.support import test_database_url

    env = {**os.environ, "DATABASE_URL": test_database_url(), "DB_POOL": "false", "VAR_DIR": str(tmp_path)}
    web, dispatcher = _ports()
    up = Up(web, "--no-demo", "--workers", "1", env={**env, **dispatcher})
    try:
        up.wait_for("Sign in at ", timeout=150)
        closing = up.seen[-5:]
        token = next(line for line in closing if line.startswith("TOKEN="))
        assert closing[-3:-1] == [
            f"BASE_URL=http://127.0.0.1:{web}",
            f"Ready: http://localhost:{web}/  (screens http://localhost:{web}/jobs, API http://localhost:{web}/api)."
            " Ctrl-C stops everything.",
        ]
        assert closing[-1] == (
            f"Sign in at http://localhost:{web}/login with a token (`manage.py create_token NAME` makes more); or from"
            f" a shell: ccs login --url http://localhost:{web}"
        )
        assert not any(line.startswith("TOKEN=") for line in up.seen[: -len(closing)])  # shown once, here
        assert _quiet(up, 5) == []  # every child's start-up lines came before

        for path in ("/healthz", "/login", f"/api/jobs?token={token.split('=', 1)[1]}"):
            with urllib.request.urlopen(f"http://127.0.0.1:{web}{path}", timeout=10) as response:
                assert response.status == 200
        assert _quiet(up, 3) == []  # no access log

        # A job's end is told once, by the job runner; Celery's routine lines stay out of the terminal.
        corpus = tmp_path / "corpora" / "one"
        corpus.mkdir(parents=True)
        (corpus / "one.tex").write_text("\\documentclass{article}\\begin{document}x\\end{document}")
        body = json.dumps({"name": "one", "path": str(corpus)}).encode()
        headers = {"Content-Type": "application/json", "X-Service-Token": token.split("=", 1)[1]}
        request = urllib.request.Request(f"http://127.0.0.1:{web}/api/corpora", data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (http, built here)
            assert response.status in (201, 202)
        told = []
        deadline = time.monotonic() + 60
        while not any("job corpus_import" in line and " ended " in line for line in told):
            assert time.monotonic() < deadline, "no line told the import job's end:\n" + "\n".join(told)
            told += _quiet(up, 1)
        told += _quiet(up, 2)
        assert not [line for line in told if re.search(r"\] received|\] succeeded in ", line)], told
        assert up.stop() == 0
    finally:
        if up.process.poll() is None:
            up.process.kill()


def test_up_gives_its_web_server_the_passkey_relying_party_of_its_host_and_port(monkeypatch):
    monkeypatch.delenv("PASSKEY_RP_ID", raising=False)
    monkeypatch.delenv("PASSKEY_ORIGINS", raising=False)
    for host in ("127.0.0.1", "0.0.0.0", "::1", "localhost"):  # noqa: S104
        env = web_child(host=host, port=9000, processes=1).env
        assert (env["PASSKEY_RP_ID"], env["PASSKEY_ORIGINS"]) == ("localhost", "http://localhost:9000"), host
    env = web_child(host="ccs.lab.example", port=9001, processes=1).env
    assert (env["PASSKEY_RP_ID"], env["PASSKEY_ORIGINS"]) == ("ccs.lab.example", "http://ccs.lab.example:9001")
    monkeypatch.setenv("PASSKEY_RP_ID", "ccs.example.org")
    env = web_child(host="127.0.0.1", port=9000, processes=1).env
    assert (env["PASSKEY_RP_ID"], env["PASSKEY_ORIGINS"]) == ("ccs.example.org", "http://ccs.example.org:9000")
    monkeypatch.setenv("PASSKEY_ORIGINS", "https://ccs.example.org")  # the operator's, behind a proxy: kept
    env = web_child(host="127.0.0.1", port=9000, processes=1).env
    assert (env["PASSKEY_RP_ID"], env["PASSKEY_ORIGINS"]) == ("ccs.example.org", "https://ccs.example.org")
    assert "--access-logfile" not in env and "--access-logfile" not in web_child(host="h", port=1, processes=1).argv
    assert "--access-logfile" in web_child(host="h", port=1, processes=1, access_log=True).argv
