"""A populated database is carried from the schema of the fixture (tests/fixtures/carry/from.json) to the
latest migrations with every row and every report unchanged.

In a database of its own, the test migrates to the fixture's leaf migrations, loads its dump, migrates to
the latest, and compares each model's rows and the API's answer to every report with those recorded when
the fixture was built (tests/migrations/build_fixture.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.migrations import carry


@pytest.fixture
def carried(django_db_blocker, settings) -> Iterator[None]:
    """A fresh database (the test database's name with _carry), at the fixture's schema with its data, then
    migrated to the latest migrations; the result archives its tasks point to are the fixture's."""
    settings.RESULTS_DIR = carry.RESULTS
    with django_db_blocker.unblock(), carry.database_of_its_own(f"{connection.settings_dict['NAME']}_carry"):
        carry.migrate(sorted(json.loads(carry.FROM.read_text()).items()))
        carry.dump_load(carry.DUMP.read_text())
        carry.migrate()
        yield


def _rows_changed(recorded: dict[str, list[list]], now: dict[str, list[list]]) -> list[str]:
    """Per model of the fixture, what differs: gone, other columns, rows lost, added or changed."""
    problems = []
    for model, (columns, *rows) in recorded.items():
        if model not in now:
            problems.append(f"{model}: no model of that name after the migrations")
            continue
        columns_now, *rows_now = now[model]
        if not set(columns) <= set(columns_now):
            problems.append(f"{model}: columns {columns} became {columns_now}")
            continue
        # Columns a later migration added are not the fixture's to judge; every recorded column must keep its values.
        kept = [columns_now.index(column) for column in columns]
        rows_now = [[row[index] for index in kept] for row in rows_now]
        lost = [row for row in rows if row not in rows_now]
        added = [row for row in rows_now if row not in rows]
        if lost or added:
            problems.append(f"{model}: {len(rows)} rows became {len(rows_now)}; lost {lost[:3]}, added {added[:3]}")
    return problems


def test_a_populated_database_keeps_every_row_and_every_report_through_the_migrations(carried):
    assert _rows_changed(json.loads(carry.ROWS.read_text()), carry.model_rows()) == []
    positions = carry.sequence_positions()
    recorded_positions = json.loads(carry.SEQUENCES.read_text())
    assert {model: positions.get(model) for model in recorded_positions} == recorded_positions

    recorded = json.loads(carry.REPORTS.read_text())
    client = APIClient()
    client.credentials(HTTP_X_SERVICE_TOKEN=recorded["token"])
    changed = []
    for url, answer in recorded["reports"].items():
        changed += [f"{url} {line}" for line in carry.differences(answer, carry.answer(client, url))]
    assert not changed, f"{len(changed)} differences in the reports:\n" + "\n".join(changed[:200])
