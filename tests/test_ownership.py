"""The table-ownership check (tests/ownership.py): every table belongs to the app that declares it, and a
write from another app's module is caught, whether the statement names the table or the ORM writes it."""

from __future__ import annotations

import pytest
from django.db import connection

from corpora.models import Task
from tests.ownership import WATCH, OwnershipWatch, table_owners, violations_of, written_tables
from tests.support import PROJECT_DIR

# A module of the runs app, as the interpreter sees it: its frames carry this file name.
POSING_AS_RUNS = str(PROJECT_DIR / "runs" / "ownership_probe.py")
PROBE = f"""
def write_tasks(cursor):
    cursor.execute("UPDATE {Task._meta.db_table} SET attempts = attempts WHERE id = -1")


def write_tasks_by_orm():
    Task.objects.filter(pk=-1).update(attempts=0)
"""  # noqa: S608  (a statement of our own, on a row that does not exist)


def _probe() -> dict:
    namespace: dict = {"Task": Task}
    exec(compile(PROBE, POSING_AS_RUNS, "exec"), namespace)  # noqa: S102  (our own source, for its file name)
    return namespace


def test_every_table_of_the_project_has_one_owner_and_reports_and_runs_own_none():
    owners = table_owners()
    assert owners["corpora_task"] == "corpora"
    assert owners["corpora_taskmessages"] == "corpora"
    assert owners["corpora_reportgrain"] == "corpora"
    assert owners["corpora_telemetrybin"] == "corpora"
    assert owners["services_worker"] == "services"
    assert owners["jobs_job"] == "jobs"
    assert {"reports", "runs"}.isdisjoint(owners.values())
    assert all(table.startswith(f"{app}_") for table, app in owners.items())


def test_the_written_tables_are_the_targets_of_inserts_updates_deletes_truncates_and_copies():
    assert written_tables('INSERT INTO "corpora_task" ("status") VALUES (0)') == {"corpora_task"}
    assert written_tables("WITH gone AS (DELETE FROM corpora_taskclass p USING s) SELECT 1") == {"corpora_taskclass"}
    assert written_tables("TRUNCATE corpora_task, jobs_job CASCADE") == {"corpora_task", "jobs_job"}
    assert written_tables("COPY corpora_taskmessages (task_id) FROM STDIN") == {"corpora_taskmessages"}
    assert "corpora_task" not in written_tables("SELECT id FROM corpora_task FOR UPDATE OF t SKIP LOCKED")
    assert written_tables("COPY (SELECT 1 FROM corpora_task) TO STDOUT") == set()


def test_a_module_writing_another_apps_table_is_a_violation():
    owners = table_owners()
    stack = [str(PROJECT_DIR / "runs" / "actions.py"), str(PROJECT_DIR / "tests" / "runs" / "test_x.py")]
    [violation] = violations_of("DELETE FROM corpora_snapshot WHERE id = 1", stack, owners)
    assert (violation.app, violation.table, violation.owner) == ("runs", "corpora_snapshot", "corpora")
    assert violations_of("DELETE FROM corpora_snapshot WHERE id = 1", stack[::-1], owners) == []  # a test's own
    own = [str(PROJECT_DIR / "corpora" / "pairs.py"), stack[0]]
    assert violations_of("DELETE FROM corpora_snapshot WHERE id = 1", own, owners) == []  # the innermost app's
    migration = [str(PROJECT_DIR / "corpora" / "migrations" / "0001_initial.py")]
    assert violations_of("INSERT INTO services_service (name) VALUES ('x')", migration, owners) == []


@pytest.mark.django_db
def test_the_watch_catches_a_real_write_from_another_apps_module():
    probe = _probe()
    watch = OwnershipWatch()
    with WATCH.paused(), connection.execute_wrapper(watch), connection.cursor() as cursor:
        probe["write_tasks"](cursor)
        probe["write_tasks_by_orm"]()
    assert [(v.app, v.table, v.owner, v.where) for v in watch.violations] == [
        ("runs", "corpora_task", "corpora", "runs/ownership_probe.py"),
    ] * 2
    assert watch.statements == 2


@pytest.mark.django_db
def test_the_watch_lets_the_owner_write():
    from corpora.task_changes import tasks_pause

    watch = OwnershipWatch()
    with connection.execute_wrapper(watch):
        tasks_pause(corpus_id=-1, service_id=-1)
    assert watch.statements >= 1
    assert watch.violations == []


@pytest.mark.django_db
def test_the_session_watch_is_installed_and_sees_statements():
    before = WATCH.statements
    Task.objects.filter(pk=-1).update(attempts=0)
    assert WATCH.statements > before
