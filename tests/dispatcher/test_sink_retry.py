"""The sink's writer against a lost connection: a real dispatcher, its writer's backend ended by the test."""

from __future__ import annotations

import psycopg
import pytest

from corpora.models import LogMessage, Task, TaskRuntime
from services.models import DispatcherState
from tests.dispatcher.harness import WARNING_LOG, FakeWorker, result_zip, wait_for
from tests.support import test_database_url as database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def leased(corpus_root, dispatcher):
    """A running dispatcher, a fake worker and the ids of the three tasks it was handed."""
    from tests.corpora.helpers import activated, imported

    imported(corpus_root, "demo", documents=3)
    activated("demo")
    process = dispatcher()
    worker = FakeWorker(process)
    wait_for(lambda: DispatcherState.objects.first(), message="the dispatcher to start")
    tasks = [wait_for(lambda: worker.ask("tex_to_html"), message="a task")[0] for _ in range(3)]
    yield process, worker, tasks
    worker.close()


def _writer_waiting(watcher: psycopg.Connection) -> int | None:
    """The pid of the sink's writer while it waits to lock the tasks of its batch (results_lock)."""
    watcher.execute("SELECT pg_stat_clear_snapshot()")
    row = watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
        " AND strpos(query, 'FOR UPDATE OF t') > 0"
    ).fetchone()
    return row[0] if row else None


def test_a_batch_whose_writer_connection_is_ended_is_applied_once_after_a_retry(leased):
    process, worker, tasks = leased
    with psycopg.connect(database_url()) as session:
        # The writer's transaction waits for this lock on a task of its batch; there its connection is ended.
        session.execute("SELECT 1 FROM corpora_task WHERE id = %s FOR UPDATE", [int(tasks[0])])
        try:
            for task_id in tasks:
                worker.give("tex_to_html", task_id, result_zip(WARNING_LOG))
            with psycopg.connect(database_url(), autocommit=True) as watcher:
                pid = wait_for(lambda: _writer_waiting(watcher), timeout=30, message="the writer to wait for the lock")
                watcher.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])
        finally:
            session.rollback()
    wait_for(
        lambda: Task.objects.filter(pk__in=tasks, status__lt=0).count() == 3, timeout=60, message="every result applied"
    )
    assert process.alive
    assert set(Task.objects.filter(pk__in=tasks).values_list("status", flat=True)) == {-3}
    # Once each: the three messages of the log and one runtime per task.
    for task_id in tasks:
        assert LogMessage.objects.filter(task_id=task_id).count() == 3
        assert TaskRuntime.objects.filter(task_id=task_id).count() == 1
    state = wait_for(lambda: DispatcherState.objects.filter(ingested__gte=3).first(), message="the ingested count")
    assert (state.ingested, state.discarded) == (3, 0)
