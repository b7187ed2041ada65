"""The dispatcher, a real process against the external PostgreSQL, when its database sessions are ended again
and again (pg_terminate_backend, as an administrator or a failover does): it keeps running and answering
workers, reconnects, and the tasks still complete."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from corpora.models import Task
from services.models import DispatcherState
from tests import support
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import CLEAN_LOG, FakeWorker, result_zip, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.tcp]

TASKS = 12
TERMINATE_SECONDS = 5.0


class Terminator(threading.Thread):
    """Ends every session of the test database but the test's own, every 0.2 s, until stopped."""

    def __init__(self, spare: int) -> None:
        super().__init__(daemon=True)
        self.spare = spare
        self.ended = 0
        self.halt = threading.Event()

    def run(self) -> None:
        with psycopg.connect(support.test_database_url(), autocommit=True) as conn:
            while not self.halt.is_set():
                self.ended += conn.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s)",
                    [self.spare],
                ).fetchone()[0]
                self.halt.wait(0.2)


@pytest.mark.parametrize("pool", ["true", "false"])
def test_the_dispatcher_rides_out_ended_database_sessions_and_the_tasks_complete(corpus_root, dispatcher, pool, capfd):
    imported(corpus_root, "demo", documents=TASKS)
    activated("demo")
    tasks = Task.objects.filter(corpus__name="demo", service__name="tex_to_html")
    # A lease whose statement committed as its session was ended comes back by the reaper within the test.
    process = dispatcher(DB_POOL=pool, DISPATCHER_LEASE_SECONDS="10")
    worker = FakeWorker(process)
    wait_for(lambda: DispatcherState.objects.exists(), message="the dispatcher to start")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        own = cursor.fetchone()[0]

    # While every session of the dispatcher is ended again and again, every request is answered: a task
    # or "no work". Results are kept until the terminations stop.
    held: list[str] = []
    unanswered = 0
    terminator = Terminator(own)
    terminator.start()
    try:
        deadline = time.monotonic() + TERMINATE_SECONDS
        while time.monotonic() < deadline:
            reply = worker.raw_request([b"tex_to_html"], timeout=5)
            if reply is None:
                unanswered += 1
            elif reply[0] != b"0":
                held.append(reply[0].decode())
    finally:
        terminator.halt.set()
        terminator.join(10)
    assert terminator.ended > 0, "no session was ended: the test proved nothing"
    assert process.alive, "the dispatcher died when its database sessions were ended"
    assert unanswered == 0

    for task_id in held:
        worker.give("tex_to_html", task_id, result_zip(CLEAN_LOG))

    def every_task_final() -> bool:
        if process.alive and (got := worker.ask("tex_to_html", timeout=5)) is not None:
            worker.give("tex_to_html", got[0], result_zip(CLEAN_LOG))
        return not tasks.filter(status__gte=0).exists()

    wait_for(every_task_final, timeout=60, message=lambda: f"every task final: {list(tasks.values('id', 'status'))}")
    assert process.alive
    assert set(tasks.values_list("status", flat=True)) == {-1}
    # The dispatcher writes its heartbeat row again.
    since = DispatcherState.objects.get().heartbeat_at
    wait_for(lambda: DispatcherState.objects.filter(heartbeat_at__gt=since).exists(), message="a new heartbeat")
    worker.close()
    assert process.stop() == 0
    logged = capfd.readouterr().err
    assert "the database is away" in logged and "the database answers again" in logged
