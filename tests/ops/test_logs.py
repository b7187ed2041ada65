"""GET /api/logs and its screen twin /logs: records of real processes in a capped Redis stream, filtered,
newest first, paginated, tokens masked; the handler never blocks nor raises when Redis is down."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import pytest

from config.logsink import STREAM, RedisLogHandler
from config.redis_client import redis_client
from ops.supervisor import Child, Supervisor
from tests.support import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.tcp]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stream():
    client = redis_client()
    client.delete(STREAM)
    yield client
    client.delete(STREAM)


def _child_logs(code: str, name: str | None = None) -> int:
    """Run a real `manage.py shell -c code` (under the supervisor with a role when name is given); its pid."""
    argv = [sys.executable, "manage.py", "shell", "-c", code]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("CCS_PROCESS", None)
    if name:
        child = Supervisor().start(Child(name, argv, env))
        process = child.process
    else:
        import subprocess

        process = subprocess.Popen(argv, env=env, cwd=ROOT)
    assert process.wait(timeout=60) == 0
    return process.pid


def _logs(authed, **params) -> dict:
    response = authed.get("/api/logs", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_logs_need_a_token(api):
    response = api.get("/api/logs")
    assert response.status_code == 401


def test_records_of_real_processes_appear_with_their_process_name_newest_first_and_tokens_masked(authed, stream):
    token = "ccs_" + "A" * 30
    pid_a = _child_logs(
        f"import logging; logging.getLogger('probe').warning('from the dispatcher ?token={token} and {token}')",
        name="dispatcher",
    )
    pid_b = _child_logs(
        "import logging; logging.getLogger('probe').info('from a shell'); logging.getLogger('probe').debug('not kept')"
    )
    records = [r for r in _logs(authed)["records"] if r["logger"] == "probe"]
    assert [(r["process"], r["pid"], r["level"]) for r in records] == [
        ("shell", pid_b, "INFO"),
        ("dispatcher", pid_a, "WARNING"),
    ]
    assert token not in json.dumps(records) and token not in str(stream.xrange(STREAM))
    assert "token=***" in records[1]["message"] and "ccs_***" in records[1]["message"]

    assert [r["process"] for r in _logs(authed, process="dispatcher")["records"]] == ["dispatcher"]
    warnings = _logs(authed, level="WARNING")["records"]
    assert all(r["level"] in ("WARNING", "ERROR", "CRITICAL") for r in warnings)
    assert warnings and "from the dispatcher" in warnings[0]["message"]


@pytest.mark.urls("tests.config.faults_urls")
def test_a_request_s_records_are_found_by_its_request_id(authed, stream):
    authed.raise_request_exception = False
    response = authed.get("/api/_test/crash", HTTP_X_REQUEST_ID="logs-test-42")
    assert response.status_code == 500
    records = _logs(authed, request_id="logs-test-42")["records"]
    assert records and all(r["request_id"] == "logs-test-42" for r in records)
    assert any(r["level"] == "ERROR" and "RuntimeError" in r["message"] for r in records)
    assert _logs(authed, request_id="logs-test-none")["records"] == []


def test_pages_follow_the_before_cursor(authed, stream):
    probe = logging.getLogger("probe.pages")
    for n in range(7):
        probe.warning("page record %s", n)
    seen, before = [], None
    while True:
        body = _logs(authed, limit=3, **({"before": before} if before else {}))
        seen += [r["message"] for r in body["records"] if r["logger"] == "probe.pages"]
        before = body["next_before"]
        if before is None:
            break
    assert seen == [f"page record {n}" for n in reversed(range(7))]
    assert _logs(authed, before="0-0") == {"records": [], "next_before": None}


@pytest.mark.parametrize(
    "params", [{"level": "LOUD"}, {"limit": "0"}, {"limit": "501"}, {"before": "x"}, {"before": "1" * 20 + "-0"}]
)
def test_bad_filters_are_400(authed, params):
    assert authed.get("/api/logs", params).status_code == 400


def test_the_logs_are_503_when_redis_is_unreachable(authed, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = authed.get("/api/logs")
    assert response.status_code == 503 and response["Content-Type"].startswith("application/problem+json")


def test_the_handler_drops_records_quickly_when_redis_is_unreachable():
    handler = RedisLogHandler(url=f"redis://127.0.0.1:{free_port()}/0")
    logger = logging.getLogger("probe.unreachable")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        started = time.monotonic()
        for n in range(50):
            logger.error("record %s", n)
        assert time.monotonic() - started < 2.0
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    assert handler.dropped == 50


def test_a_handler_without_a_url_follows_the_settings_and_tries_a_new_one_at_once(settings, stream):
    """LOGGING's handler names no URL: it writes where settings.REDIS_URL points now (a process, or the test
    session, that re-points it is followed), and a failure on one URL does not hold records for another."""
    handler = RedisLogHandler()
    record = logging.LogRecord("probe.follow", logging.WARNING, __file__, 1, "%s", ("first",), None)
    reachable = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    handler.emit(record)
    assert handler.dropped == 1
    settings.REDIS_URL = reachable
    record.args = ("second",)
    handler.emit(record)  # within the retry window of the failed URL
    record.args = ("third",)
    handler.emit(record)
    assert handler.dropped == 1
    assert [fields[b"message"] for _, fields in stream.xrange(STREAM)] == [b"second", b"third"]


def test_the_logs_screen_renders_the_same_dto_as_the_api(screen_client, authed, stream):
    logging.getLogger("probe.screen").warning("shown on both")
    screen = screen_client.get("/logs", {"level": "WARNING"})
    assert screen.status_code == 200
    plain = json.loads(json.dumps(screen.context["logs"], default=str))
    api = _logs(authed, level="WARNING")
    assert [r["id"] for r in plain["records"]] == [r["id"] for r in api["records"]][: len(plain["records"])]
    assert any(r["message"] == "shown on both" for r in plain["records"])
    assert "shown on both" in screen.content.decode()
    assert screen_client.get("/logs", {"level": "LOUD"}).status_code == 400


def test_the_logs_screen_needs_sign_in(client):
    response = client.get("/logs")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_celery_s_routine_lines_are_debug_below_the_default_level(authed, stream):
    """Beat's due tasks and a task received or succeeded are kept at DEBUG; one stored at INFO (by a process
    that ran before) is read as DEBUG too. The default level, INFO, leaves them out; DEBUG shows them."""
    handler = RedisLogHandler()
    for logger, message in [
        ("celery.beat", "Scheduler: Sending due task reports-refresh (reports.tasks.reports_refresh_scheduled)"),
        ("celery.worker.strategy", "Task jobs.tasks.jobs_sweep[6b1f0a6e-3c0e-4b7f-8f2e-1c2d3e4f5a6b] received"),
        ("celery.beat", "beat: Starting..."),
    ]:
        handler.emit(logging.LogRecord(logger, logging.INFO, __file__, 1, "%s", (message,), None))
    before = "Scheduler: Sending due task jobs-sweep-interrupted (jobs.tasks.jobs_sweep)"
    fields = {"time": "2026-11-28T10:00:00+00:00", "level": "INFO", "levelno": "20", "pid": "7", "request_id": "-"}
    stream.xadd(STREAM, {**fields, "logger": "celery.beat", "process": "celery-beat", "message": before})
    kept = [fields[b"level"] for _, fields in stream.xrange(STREAM)]
    assert kept[:3] == [b"DEBUG", b"DEBUG", b"INFO"]

    celery = [(r["level"], r["message"][:20]) for r in _logs(authed, logger="celery")["records"]]
    assert celery == [("INFO", "beat: Starting...")]
    debug = [(r["level"], r["logger"]) for r in _logs(authed, logger="celery", level="DEBUG")["records"]]
    assert debug == [("DEBUG", "celery.beat"), ("INFO", "celery.beat"), ("DEBUG", "celery.worker.strategy"),
                     ("DEBUG", "celery.beat")]  # fmt: skip
    assert _logs(authed, logger="celery.beat.nothing", level="DEBUG")["records"] == []
    assert _logs(authed, logger="celer", level="DEBUG")["records"] == []  # a logger and its children, not a prefix
