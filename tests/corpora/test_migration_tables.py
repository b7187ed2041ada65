"""Corpora migration 0014 takes the tables that corpora writes into corpora: every row stays, the
runtime-count triggers keep counting under the new names, and the migration goes back as it came."""

# ruff: noqa: S608  (table names of this test's own lists)
from __future__ import annotations

import pytest
from django.db import connection

from corpora.actions.diffs import diff_ensure, diff_rows_ensure
from corpora.actions.reports import rerun
from corpora.grains import grain_slice_rebuild
from corpora.models import Snapshot, Task
from tests.runs.helpers import classes_write, pair_close, two_runs
from tests.support import migrate

BEFORE = [
    ("corpora", "0013_document_name_folded_index"),
    ("reports", "0013_taskclass_document"),
    ("runs", "0004_telemetry"),
]
RENAMED = {
    "corpora_messageclass": "reports_messageclass",
    "corpora_taskmessages": "reports_taskmessages",
    "corpora_taskclass": "reports_taskclass",
    "corpora_stalemessages": "reports_stalemessages",
    "corpora_messagetally": "reports_messagetally",
    "corpora_taskruntime": "reports_taskruntime",
    "corpora_runtimecount": "reports_runtimecount",
    "corpora_runtimebin": "reports_runtimebin",
    "corpora_reportgrain": "reports_reportgrain",
    "corpora_grainslice": "reports_grainslice",
    "corpora_logmessage": "reports_logmessage",
    "corpora_snapshotdiff": "runs_snapshotdiff",
    "corpora_taskdiff": "runs_taskdiff",
    "corpora_telemetrybin": "runs_telemetrybin",
    "corpora_telemetryminute": "runs_telemetryminute",
    "corpora_run": "runs_run",
    "corpora_snapshot": "runs_snapshot",
    "corpora_snapshotclass": "runs_snapshotclass",
    "corpora_snapshotmembers": "runs_snapshotmembers",
}


# Columns that later migrations add to these tables (corpora 0017: a run's cost; 0018: the infrastructure
# failures of a snapshot and of a diff; 0019: a task row's package usages): not 0014's to keep.
LATER_COLUMNS = (
    "cpu_ms", "peak_rss_kb", "cpu_results", "infrastructure_document_ids", "infrastructure_matrix", "packages",
)  # fmt: skip


def _contents(names: dict[str, str]) -> dict[str, tuple[int, str]]:
    """Per table (under the name given), its row count and a digest of its rows (their columns as of 0014)."""
    found = {}
    with connection.cursor() as cursor:
        for key, table in names.items():
            cursor.execute(
                "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)"
                " FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
                " AND column_name <> ALL(%s)",
                [table, list(LATER_COLUMNS)],
            )
            columns = cursor.fetchone()[0]
            cursor.execute(
                f"SELECT count(*), md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), ''))"
                f" FROM (SELECT ROW({columns}) AS r FROM {table}) t"
            )
            found[key] = cursor.fetchone()
    return found


def _runtime_counted(runtimes: str, counts: str, bins: str, task: Task) -> tuple[int, int]:
    """Add a runtime of 70 ms for `task`: how many such runtimes the counts and the bins then hold."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {runtimes} (task_id, corpus_id, service_id, runtime_ms) VALUES (%s, %s, %s, 70)"
            f" ON CONFLICT (task_id) DO UPDATE SET runtime_ms = 70",
            [task.pk, task.corpus_id, task.service_id],
        )
        cursor.execute(f"SELECT count FROM {counts} WHERE service_id = %s AND runtime_ms = 70", [task.service_id])
        count = cursor.fetchone()[0]
        cursor.execute(f"SELECT count FROM {bins} WHERE service_id = %s AND bin = 1", [task.service_id])
        return count, cursor.fetchone()[0]


def _names_left(prefixes: tuple[str, ...]) -> list[str]:
    """Constraints, indexes and sequences of the renamed tables still named after an old app."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('i', 'S')"
            " AND EXISTS (SELECT FROM unnest(%s::text[]) p WHERE starts_with(c.relname, p))"
            " UNION SELECT conname FROM pg_constraint"
            " WHERE EXISTS (SELECT FROM unnest(%s::text[]) p WHERE starts_with(conname, p))",
            [list(prefixes), list(prefixes)],
        )
        return sorted(row[0] for row in cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_the_tables_move_to_corpora_with_their_rows_and_back(corpus_root):
    two_runs(corpus_root, with_next=False)
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester")  # a third run, whose snapshot has classes
    classes_write([{("warning", "a", "b")}, {("error", "c", "d")}, set(), {("fatal", "e", "f")}])
    pair_close()
    task = Task.objects.filter(corpus__name="a", service__name="tex_to_html").order_by("pk").first()
    snapshots = list(Snapshot.objects.order_by("taken_at").values_list("pk", flat=True))
    diff_rows_ensure(diff_ensure(previous_id=snapshots[0], current_id=snapshots[-1]))
    grain_slice_rebuild(task.corpus_id, task.service_id, "warning")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_telemetrybin (run_id, stage, bin, count)"
            " SELECT id, 1, 2, 3 FROM corpora_run ON CONFLICT DO NOTHING"
        )
        cursor.execute(
            "INSERT INTO corpora_telemetryminute (run_id, minute, count)"
            " SELECT id, now(), 4 FROM corpora_run ON CONFLICT DO NOTHING"
        )
    assert _runtime_counted("corpora_taskruntime", "corpora_runtimecount", "corpora_runtimebin", task) == (1, 1)
    after = _contents({table: table for table in RENAMED})
    assert [table for table, (count, _) in after.items() if not count] == ["corpora_stalemessages"]
    assert _names_left(("reports_", "runs_")) == []

    migrate(BEFORE)
    try:
        assert _contents(RENAMED) == after
        assert _names_left(("corpora_taskmessages", "corpora_run_", "corpora_snapshot_")) == []
        # Only the columns of 0013's task table.
        older = Task.objects.only("id", "corpus_id", "service_id")
        other = older.filter(service=task.service_id).exclude(pk=task.pk).order_by("pk").first()
        assert _runtime_counted("reports_taskruntime", "reports_runtimecount", "reports_runtimebin", other) == (2, 2)
        before = _contents(RENAMED)
    finally:
        migrate()
    assert _contents({table: table for table in RENAMED}) == before
    assert _names_left(("reports_", "runs_")) == []
    third = Task.objects.filter(service=task.service_id).exclude(pk__in=[task.pk, other.pk]).order_by("pk").first()
    assert _runtime_counted("corpora_taskruntime", "corpora_runtimecount", "corpora_runtimebin", third) == (3, 3)
