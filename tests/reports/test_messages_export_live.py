"""The messages export through gunicorn as `manage.py up` starts it: a client that reads a little and goes
away ends the export's query in PostgreSQL, and the web process goes on answering."""

from __future__ import annotations

import http.client
import socket
import subprocess

import psutil
import pytest
from django.db import connection, transaction

from corpora.message_store import messages_write
from corpora.models import Task
from corpora.queries.reports import EXPORT_CURSOR, EXPORT_MARKER
from ops.stack import web_child
from tests.corpora.helpers import activated, imported
from tests.support import PROJECT_DIR, child_env, free_port, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DOCUMENTS = 40
MESSAGES = 500
DETAILS = 1_900  # about 40 MB of CSV in all, far more than the sockets between server and client buffer
EXPORT = "/api/reports/big/tex_to_html/messages?format=csv"


@pytest.fixture
def big(corpus_root) -> list[Task]:
    imported(corpus_root, "big", documents=DOCUMENTS)
    activated("big")
    tasks = list(Task.objects.filter(corpus__name="big", service__name="tex_to_html").order_by("pk"))
    Task.objects.filter(pk__in=[task.pk for task in tasks]).update(status=-3)
    with transaction.atomic(), connection.cursor() as cursor:
        messages_write(cursor, [
            (task.pk, task.corpus_id, task.service_id, -3,
             [("error", "undefined", f"\\m{i % 50}", f"{i:06d} " + "x" * DETAILS) for i in range(MESSAGES)])
            for task in tasks
        ])  # fmt: skip
    return tasks


@pytest.fixture
def web(tmp_path):
    """One gunicorn worker on a free port, on the test database with the connection pool `up` runs with
    (a connection outlives its request); (port, worker process)."""
    port = free_port()
    child = web_child(host="127.0.0.1", port=port, processes=1)
    with (tmp_path / "web.log").open("wb") as log:
        process = subprocess.Popen(
            child.argv,
            cwd=PROJECT_DIR,
            env=child_env(DB_POOL="true"),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def answers() -> bool:
        assert process.poll() is None, (tmp_path / "web.log").read_text()
        try:
            return _get(port, "/healthz")[0] == 200
        except OSError:
            return False

    try:
        wait_until(answers, 60, message="gunicorn")
        yield port, psutil.Process(process.pid).children()[0]
    finally:
        process.terminate()
        process.wait(30)


def _get(port: int, path: str) -> tuple[int, bytes]:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        client.request("GET", path)
        response = client.getresponse()
        return response.status, response.read()
    finally:
        client.close()


def _export_backend() -> int | None:
    """The backend of another session that is in a transaction running or holding the export's cursor."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND xact_start IS NOT NULL AND (strpos(query, %s) > 0 OR strpos(query, %s) > 0)",
            [EXPORT_MARKER, f'FROM "{EXPORT_CURSOR}"'],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _transaction_over(pid: int) -> bool:
    """Whether backend `pid` is gone or no longer in a transaction (its cursor closed, its query ended)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT xact_start IS NULL FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is None or row[0]


def test_a_client_that_goes_away_ends_the_query_and_the_worker_answers_on(big, web):
    port, worker = web
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    client.sendall(f"GET {EXPORT} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    received = b""
    while len(received) < 1 << 16:
        received += client.recv(1 << 16)
    assert received.startswith(b"HTTP/1.1 200 OK"), received[:200]
    # The server is held up by the socket, mid-export: its backend keeps the cursor in a transaction.
    pid = wait_until(_export_backend, 30, interval=0.05, message="the export's backend in a transaction")
    assert _transaction_over(pid) is False

    client.close()  # with unread data: the kernel resets the connection, and the server's next write fails
    wait_until(lambda: _transaction_over(pid), 30, interval=0.05, message=f"backend {pid} to leave the export")
    assert _export_backend() is None

    # The same worker answers the next export in full.
    status, body = _get(
        port, "/api/reports/big/tex_to_html/messages?severity=error&category=undefined&what=%5Cm7&format=jsonl"
    )
    assert status == 200 and len(body.splitlines()) == DOCUMENTS * MESSAGES // 50
    assert [child.pid for child in worker.parent().children()] == [worker.pid]
