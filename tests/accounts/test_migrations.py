"""The migration that spells every journal name app.operation renames the entries already stored, and
back; the other entries keep their names."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.support import migrate

BEFORE = [("accounts", "0002_screensession")]
AFTER = [("accounts", "0003_journal_names_dotted")]


def _actions() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT target, action FROM accounts_auditentry ORDER BY id")
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
def test_stored_maintenance_entries_take_the_dotted_names_and_back():
    migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO accounts_auditentry (actor, action, target, params, outcome, request_id, created_at)"
                " VALUES ('op', %s, %s, '{}', 'ok', '', now())",
                [("maintenance_reindex", "1"), ("maintenance_analyze", "2"), ("reports.rerun", "3"),
                 ("maintenance_reindex", "4")],
            )  # fmt: skip
        migrate(AFTER)
        assert _actions() == [
            ("1", "maintenance.reindex"), ("2", "maintenance.analyze"), ("3", "reports.rerun"),
            ("4", "maintenance.reindex"),
        ]  # fmt: skip
        migrate(BEFORE)
        assert _actions() == [
            ("1", "maintenance_reindex"), ("2", "maintenance_analyze"), ("3", "reports.rerun"),
            ("4", "maintenance_reindex"),
        ]  # fmt: skip
    finally:
        migrate()
