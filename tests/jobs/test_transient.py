"""Jobs against transient database errors: real deadlocks, ended connections and held locks, made by a second
session of the test, and the maintenance lane."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.db import connections

from jobs.models import Job, JobState
from jobs.runner import job_run
from tests.factories import JobFactory
from tests.support import test_database_url as database_url
from tests.support import wait_until

# The retries open new connections and the other sessions must see the job rows: no test transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session() -> Iterator[psycopg.Connection]:
    """A second connection to the test database, in a transaction of its own (rolled back at the end)."""
    with psycopg.connect(database_url()) as other:
        yield other
        other.rollback()


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list]:
    """Run `work` on a thread with its own connections; its outcome (value or error) lands in the list."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _lines(job: Job) -> list[str]:
    return [line.split(" ", 1)[1] for line in job.log]


def _backend_waiting(session: psycopg.Connection, marker: str) -> int | None:
    """The pid of another session whose statement contains `marker` and waits for a lock."""
    session.execute("SELECT pg_stat_clear_snapshot()")
    row = session.execute(
        "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
        " AND strpos(query, %s) > 0",
        [marker],
    ).fetchone()
    return row[0] if row else None


def _terminate_when_waiting(session: psycopg.Connection, marker: str) -> Callable[[], None]:
    """Work for a thread: end the connection of the session that waits for a lock with `marker` in its
    statement, then free the lock it waited for (the session's transaction), whatever happened."""

    def terminate() -> None:
        try:
            with psycopg.connect(database_url(), autocommit=True) as watcher:
                pid = wait_until(lambda: _backend_waiting(watcher, marker), timeout=30, interval=0.02, message=marker)
                watcher.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])
        finally:
            session.rollback()

    return terminate


def test_a_job_that_meets_a_deadlock_runs_again_and_succeeds(session):
    first, second = JobFactory(), JobFactory()
    # The other side: holds the second row, then asks for the first once the job holds it.
    session.execute("SET LOCAL deadlock_timeout = '60s'")  # the job's session finds the deadlock, not this one
    session.execute("UPDATE jobs_job SET message = 'other' WHERE uuid = %s", [second.pk])

    def other_side() -> None:
        def job_holds_first() -> bool:
            session.execute("SELECT pg_stat_clear_snapshot()")
            return bool(
                session.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                    " AND strpos(query, 'test_rows_update holding') > 0"
                ).fetchone()
            )

        try:
            wait_until(job_holds_first, timeout=30, interval=0.02, message="the job to hold the first row")
            session.execute("UPDATE jobs_job SET message = 'other' WHERE uuid = %s", [first.pk])  # waits for the job
        finally:
            session.rollback()

    job = JobFactory(
        kind="test_rows_update",
        params={"first": str(first.pk), "second": str(second.pk), "waiter": session.info.backend_pid},
    )
    thread, outcome = _in_thread(other_side)
    assert job_run(job.pk) == JobState.SUCCEEDED
    thread.join(30)
    assert outcome == [None]
    job.refresh_from_db()
    lines = _lines(job)
    assert lines[0] == "updating" and lines[-1] == "updating"
    assert [line for line in lines if line.startswith("attempt 1 stopped by a deadlock with another transaction")]
    assert job.message == "done" and job.result == {"updated": [str(first.pk), str(second.pk)]}
    assert Job.objects.get(pk=first.pk).message == "touched"


def test_a_job_whose_connection_is_ended_runs_again_on_a_new_one(session):
    row = JobFactory()
    session.execute("UPDATE jobs_job SET message = 'held' WHERE uuid = %s", [row.pk])  # the job waits for it
    job = JobFactory(kind="test_rows_update", params={"first": str(row.pk)})

    thread, outcome = _in_thread(_terminate_when_waiting(session, "test_rows_update */ UPDATE"))
    assert job_run(job.pk) == JobState.SUCCEEDED
    thread.join(30)
    assert outcome == [None]
    job.refresh_from_db()
    lines = _lines(job)
    assert lines.count("updating") == 2
    assert [line for line in lines if line.startswith("attempt 1 stopped by the database server shut the connection")]
    assert Job.objects.get(pk=row.pk).message == "touched"


def test_an_error_that_is_not_transient_is_not_retried():
    job = JobFactory(kind="test_duplicate", params={"key": "twice"})
    assert job_run(job.pk) == JobState.FAILED
    job.refresh_from_db()
    assert _lines(job) == ["inserting"]
    assert job.message.startswith("internal error: IntegrityError")


def test_a_job_that_keeps_meeting_a_transient_error_fails_with_what_to_do(session):
    row = JobFactory()
    session.execute("SELECT 1 FROM jobs_job WHERE uuid = %s FOR UPDATE", [row.pk])  # held for the whole test
    job = JobFactory(kind="test_rows_update", params={"first": str(row.pk), "nowait": True})
    assert job_run(job.pk) == JobState.FAILED
    job.refresh_from_db()
    assert job.message.startswith("gave up after 6 attempts: a lock not available in time; ")
    assert "run it again once the jobs and maintenance in progress have ended" in job.message
    assert "Error" not in job.message  # words, not an exception's repr
    lines = _lines(job)
    assert lines.count("updating") == 6
    assert len([line for line in lines if line.startswith("attempt ")]) == 5


def test_a_progress_write_on_a_lost_connection_does_not_fail_the_job():
    job = JobFactory(kind="test_connection_lost", params={"dsn": database_url()})
    assert job_run(job.pk) == JobState.SUCCEEDED
    job.refresh_from_db()
    assert _lines(job) == ["still here"]
    assert (job.progress_current, job.progress_total, job.message) == (2, 2, "done")


def test_reindex_and_analyze_started_together_run_one_after_the_other(session):
    # The reindex waits at its first table for this connection's transaction (REINDEX CONCURRENTLY waits for
    # every transaction that may write the table), so the analyze starts while the reindex holds the lane.
    session.execute("LOCK TABLE corpora_task IN ROW EXCLUSIVE MODE")
    reindex, analyze = JobFactory(kind="maintenance_reindex"), JobFactory(kind="maintenance_analyze")
    try:
        first, first_outcome = _in_thread(lambda: job_run(reindex.pk))
        with psycopg.connect(database_url(), autocommit=True) as watcher:
            wait_until(lambda: _backend_waiting(watcher, "REINDEX TABLE CONCURRENTLY"), timeout=60, interval=0.05)
        second, second_outcome = _in_thread(lambda: job_run(analyze.pk))

        def analyze_waits() -> bool:
            return any(line.startswith("waiting for") for line in _lines(Job.objects.get(pk=analyze.pk)))

        wait_until(analyze_waits, timeout=60, interval=0.05, message="the analyze job to wait for the reindex")
    finally:
        session.rollback()
    first.join(120)
    second.join(120)
    assert (first_outcome, second_outcome) == ([JobState.SUCCEEDED], [JobState.SUCCEEDED])
    reindex.refresh_from_db()
    analyze.refresh_from_db()
    waiting = _lines(analyze)
    assert (
        waiting[0] == f"waiting for maintenance_reindex {reindex.pk.hex[:8]} to finish (one maintenance job at a time)"
    )
    assert waiting[1].startswith("the other maintenance job finished; starting after ")
    assert analyze.started_at < reindex.finished_at
    assert len(waiting) == len(analyze.result["tables"]) + 2


def test_an_import_whose_connection_is_ended_while_writing_tries_its_transaction_again(session, corpus_root):
    from corpora.actions.corpora import corpus_import
    from corpora.choices import CorpusState
    from corpora.models import Corpus
    from tests.corpora.helpers import make_corpus_dir

    job = corpus_import(name="demo", path=str(make_corpus_dir(corpus_root, "demo", 3)), actor="t", send=False)
    corpus_id = job.params["corpus_id"]
    # The import marks its corpus ready last in its transaction: that statement waits for this lock.
    session.execute("SELECT 1 FROM corpora_corpus WHERE id = %s FOR UPDATE", [corpus_id])

    thread, outcome = _in_thread(_terminate_when_waiting(session, 'UPDATE "corpora_corpus"'))
    assert job_run(job.pk) == JobState.SUCCEEDED
    thread.join(30)
    assert outcome == [None]
    job.refresh_from_db()
    # Not run again whole (the import removes its corpus when it fails): its transaction was tried again.
    assert [line for line in _lines(job) if line.startswith("attempt 1 stopped by the database server shut")]
    corpus = Corpus.objects.get(pk=corpus_id)
    assert corpus.state == CorpusState.READY and corpus.documents.count() == 3
    assert job.result["documents"] == 3
