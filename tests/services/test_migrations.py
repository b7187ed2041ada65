"""The migration that gives services their converter profile gives every existing service the default one,
which is today's command line, and a row written without one (by SQL) gets it too."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from conversion.profiles import DEFAULT
from tests.support import migrate

BEFORE = [("services", "0004_worker_heartbeats")]
AFTER = [("services", "0005_service_profile")]


@pytest.mark.django_db(transaction=True)
def test_existing_services_get_the_default_profile():
    migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO services_service (name, version, inputformat, outputformat, command, description,"
                " created_at) VALUES ('older', '1', 'tex', 'html', '', '', now())"
            )
        migrate(AFTER)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO services_service (name, version, inputformat, outputformat, command, description,"
                " created_at) VALUES ('by_sql', '1', 'tex', 'html', '', '', now())"
            )
            cursor.execute("SELECT name, profile FROM services_service WHERE name IN ('older', 'by_sql') ORDER BY name")
            rows = cursor.fetchall()
        assert [(name, json.loads(profile)) for name, profile in rows] == [
            ("by_sql", DEFAULT.as_json()),
            ("older", DEFAULT.as_json()),
        ]
    finally:
        migrate()
