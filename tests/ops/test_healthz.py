from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import PROJECT_DIR, child_env, free_port

pytestmark = [pytest.mark.django_db, pytest.mark.tcp]


def test_healthz_is_the_liveness_record_of_the_specification_and_nothing_more(api):
    response = api.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": {"reachable": True}}


def test_healthz_is_503_when_the_database_does_not_answer():
    closed = free_port()  # nothing listens here
    script = (
        "import django, json; django.setup(); from django.test import Client; "
        "r = Client().get('/healthz'); print(r.status_code); print(r.content.decode())"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=PROJECT_DIR,
        env=child_env(DATABASE_URL=f"postgresql://postgres@127.0.0.1:{closed}/nothing", DB_POOL="false"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    status, body = result.stdout.strip().splitlines()[-2:]
    assert status == "503", result.stderr[-2000:]
    assert json.loads(body) == {"status": "unavailable", "database": {"reachable": False}}


def test_metrics_need_a_token_and_speak_the_text_format(client, token):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", {"token": "ccs_wrong"}).status_code == 401
    response = client.get("/metrics", HTTP_X_SERVICE_TOKEN=token)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert b"django_http_requests_total_by_method_total" in response.content
