from __future__ import annotations

import socket
from datetime import timedelta

import psutil
import pytest
from django.utils import timezone

from jobs.actions import job_enqueue, jobs_interrupt_dead, jobs_requeue_orphans
from jobs.models import Job, JobState
from jobs.runner import job_run, worker_identity
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_a_job_runs_to_success_with_progress_log_and_result():
    job = JobFactory(kind="test_count", params={"steps": 4})
    assert job_run(job.pk) == JobState.SUCCEEDED
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert (job.progress_current, job.progress_total) == (4, 4)
    assert job.result == {"counted": 4}
    assert [line.split(" ", 1)[1] for line in job.log] == ["step 1", "step 2", "step 3", "step 4"]
    assert job.started_at <= job.finished_at and job.worker == worker_identity()


def test_an_expected_failure_ends_failed_with_its_message():
    job = JobFactory(kind="test_fail", params={"reason": "path is not a directory"})
    assert job_run(job.pk) == JobState.FAILED
    job.refresh_from_db()
    assert job.message == "path is not a directory" and job.finished_at is not None


def test_a_crash_ends_failed_with_a_one_line_message():
    job = JobFactory(kind="test_crash")
    job_run(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.message.startswith("internal error: ZeroDivisionError") and "\n" not in job.message


def test_an_unknown_kind_fails_instead_of_crashing_the_worker():
    job = JobFactory(kind="no_such_kind")
    assert job_run(job.pk) == JobState.FAILED
    job.refresh_from_db()
    assert "unknown job kind" in job.message


def test_a_job_is_never_run_twice():
    job = JobFactory(kind="test_count", params={"steps": 1})
    job_run(job.pk)
    finished = Job.objects.get(pk=job.pk).finished_at
    assert job_run(job.pk) == JobState.SUCCEEDED
    assert Job.objects.get(pk=job.pk).finished_at == finished


def test_a_debounced_kind_returns_the_active_job_instead_of_a_new_one():
    first, created = job_enqueue(kind="test_debounced", actor="a")
    again, created_again = job_enqueue(kind="test_debounced", actor="b")
    assert created and not created_again and again.pk == first.pk
    job_run(first.pk)
    after, created_after = job_enqueue(kind="test_debounced", actor="c")
    assert created_after and after.pk != first.pk


def test_the_database_admits_one_active_job_per_debounce_key():
    from django.db import IntegrityError, transaction

    JobFactory(kind="test_debounced", debounce_key="test_debounced")
    with pytest.raises(IntegrityError), transaction.atomic():
        JobFactory(kind="test_debounced", debounce_key="test_debounced")


def test_enqueue_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown job kind"):
        job_enqueue(kind="nope", actor="a")


def _dead_pid() -> int:
    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


def test_running_jobs_of_a_dead_process_on_this_host_become_interrupted():
    host = socket.gethostname()
    dead = JobFactory(state=JobState.RUNNING, worker=f"{host}:{_dead_pid()}:1")
    alive = JobFactory(state=JobState.RUNNING, worker=worker_identity())
    reused_pid = JobFactory(state=JobState.RUNNING, worker=f"{host}:{psutil.Process().pid}:12345")
    elsewhere = JobFactory(state=JobState.RUNNING, worker="another-host:1:1")
    assert jobs_interrupt_dead() == 2
    states = {job.pk: Job.objects.get(pk=job.pk).state for job in (dead, alive, reused_pid, elsewhere)}
    assert states[dead.pk] == JobState.INTERRUPTED
    assert states[reused_pid.pk] == JobState.INTERRUPTED
    assert states[alive.pk] == JobState.RUNNING
    assert states[elsewhere.pk] == JobState.RUNNING
    assert "died" in Job.objects.get(pk=dead.pk).message


def test_queued_jobs_nobody_picked_up_are_resent(purge_broker):
    old = JobFactory()
    Job.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    JobFactory()  # fresh: its own message may still be on its way
    assert jobs_requeue_orphans() == 1


@pytest.mark.django_db(transaction=True)  # REINDEX CONCURRENTLY refuses to run inside a transaction
def test_reindex_and_analyze_report_progress_per_table():
    for kind in ("maintenance_reindex", "maintenance_analyze"):
        job, _ = job_enqueue(kind=kind, actor="tester")
        assert job_run(job.pk) == JobState.SUCCEEDED
        job.refresh_from_db()
        assert "jobs_job" in job.result["tables"]
        assert job.progress_current == job.progress_total == len(job.result["tables"])
        assert len(job.log) == len(job.result["tables"])


def _relations_and_partitions(cursor, tables: list[str]) -> list[str]:
    """The tables and, for a partitioned one, every partition of it."""
    cursor.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relname = ANY(%s)"
        " UNION SELECT p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent"
        " JOIN pg_class p ON p.oid = i.inhrelid WHERE c.relname = ANY(%s)",
        [tables, tables],
    )
    return sorted(name for (name,) in cursor.fetchall())


def _index_files(cursor, relations: list[str]) -> dict[str, int]:
    cursor.execute(
        "SELECT x.relname, x.relfilenode FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid"
        " JOIN pg_class x ON x.oid = i.indexrelid WHERE t.relname = ANY(%s) AND t.relkind = 'r'",
        [relations],
    )
    return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)  # REINDEX CONCURRENTLY refuses to run inside a transaction
def test_maintenance_covers_tasks_every_message_table_runtimes_and_grains():
    from django.db import connection

    busiest = ["corpora_task", "corpora_taskmessages", "corpora_taskclass", "corpora_messagetally"]
    busiest += ["corpora_taskruntime", "corpora_reportgrain"]
    with connection.cursor() as cursor:
        relations = _relations_and_partitions(cursor, busiest)
        before = _index_files(cursor, relations)
    assert {name.split("_")[0] for name in before} >= {"corpora", "taskclass", "runtime", "grain"}  # fixed names too

    reindex, _ = job_enqueue(kind="maintenance_reindex", actor="tester")
    assert job_run(reindex.pk) == JobState.SUCCEEDED
    reindex.refresh_from_db()
    assert set(busiest) <= set(reindex.result["tables"])
    with connection.cursor() as cursor:
        after = _index_files(cursor, relations)
    # A rebuilt index has a new file: every index of the tables and of every partition was rebuilt.
    assert after.keys() == before.keys()
    assert [name for name in before if after[name] == before[name]] == []

    analyze, _ = job_enqueue(kind="maintenance_analyze", actor="tester")
    assert job_run(analyze.pk) == JobState.SUCCEEDED
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE relname = ANY(%s) AND last_analyze IS NULL", [relations]
        )
        assert cursor.fetchall() == []
        cursor.execute("SELECT count(*) FROM pg_stat_user_tables WHERE relname = ANY(%s)", [relations])
        assert cursor.fetchone()[0] == len(relations)
