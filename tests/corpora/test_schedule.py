"""The lease order: a task becomes TODO with its expected runtime (its pair's last runtime of the document,
else its service's median), and the lease statement hands TODO tasks out longest-expected-first, or in id order
when the live key dispatcher.longest_first is off."""

from __future__ import annotations

import pytest
from django.db import connection

from conversion.choices import TaskStatus
from corpora.actions.corpora import corpus_extend
from corpora.actions.reports import rerun
from corpora.models import Task, TaskRuntime
from corpora.task_changes import lease_batch
from dispatcher.server import DispatcherConfig
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import finish
from tests.support import write_tex

pytestmark = pytest.mark.django_db

MARK = 424_242
# The runtimes of doc0..doc4 in the first run; doc3 has none (its result carried no runtime).
RUNTIMES = {"doc0": 100, "doc1": 5_000, "doc2": 300, "doc3": None, "doc4": 2_000}


def _tasks() -> dict[str, Task]:
    found = Task.objects.filter(corpus__name="a", service__name="tex_to_html").select_related("document")
    return {task.document.name: task for task in found}


def _first_run_done() -> None:
    """Finish the pair's first run with RUNTIMES as the runtimes its results carried."""
    finish([TaskStatus.NO_PROBLEM] * len(RUNTIMES))
    TaskRuntime.objects.bulk_create(
        TaskRuntime(task_id=task.pk, corpus_id=task.corpus_id, service_id=task.service_id, runtime_ms=ms)
        for name, task in _tasks().items()
        if (ms := RUNTIMES[name]) is not None
    )


def _leased_names(**order: bool) -> list[str]:
    service_id = next(iter(_tasks().values())).service_id
    names = {task.pk: name for name, task in _tasks().items()}
    return [names[t.id] for t in lease_batch(service_id=service_id, limit=100, mark=MARK, lease_seconds=60, **order)]


@pytest.fixture
def pair(corpus_root):
    imported(corpus_root, "a", documents=len(RUNTIMES))
    activated("a")


def test_a_pair_without_runtimes_expects_nothing_and_leases_in_id_order(pair):
    assert {task.expected_ms for task in _tasks().values()} == {0}
    assert _leased_names() == sorted(RUNTIMES)


def test_a_rerun_expects_each_document_s_last_runtime_and_the_median_for_one_without(pair):
    _first_run_done()
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester")
    # The median of 100, 300, 2000 and 5000 is the lower middle one, 300, in the runtime bin [300, 350) ms,
    # whose middle is 325.
    assert {name: task.expected_ms for name, task in _tasks().items()} == {
        "doc0": 100, "doc1": 5_000, "doc2": 300, "doc3": 325, "doc4": 2_000,
    }  # fmt: skip
    # Longest first; the one without a runtime of its own in the middle.
    assert _leased_names() == ["doc1", "doc4", "doc3", "doc2", "doc0"]


def test_fifo_leases_in_id_order_whatever_the_expected_runtimes(pair):
    _first_run_done()
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester")
    assert _leased_names(longest_first=False) == sorted(RUNTIMES)


def test_a_new_document_goes_in_the_middle(pair, corpus_root):
    _first_run_done()
    write_tex(corpus_root / "a" / "doc9.tex")
    job_run(corpus_extend(name="a", actor="tester", send=False).pk)
    assert _tasks()["doc9"].expected_ms == 325
    assert _leased_names() == ["doc9"]  # the only TODO task


def test_the_lease_order_follows_the_live_key(settings):
    settings.DISPATCHER_LONGEST_FIRST = False
    config = DispatcherConfig.from_settings()
    assert config.longest_first is False
    settings.DISPATCHER_LONGEST_FIRST = True
    config.follow_live()
    assert config.longest_first is True


def test_the_longest_first_lease_reads_its_index_not_every_todo_task(pair):
    """The plan of the lease's pick: an index scan of task_todo_longest_first in its order, no sort."""
    service_id = next(iter(_tasks().values())).service_id
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: the planner would scan the table
        cursor.execute(
            f"EXPLAIN SELECT id FROM {Task._meta.db_table} WHERE service_id = %s AND status = 0"  # noqa: S608
            " ORDER BY expected_ms DESC, id LIMIT 200 FOR UPDATE SKIP LOCKED",
            [service_id],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "task_todo_longest_first" in plan and "Sort" not in plan, plan
