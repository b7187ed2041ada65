"""GET /api/health and its screen twin /health: every check, problems with remediations, the overall status."""

from __future__ import annotations

import json
import re
import shutil
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from corpora.models import Task
from jobs.models import Job, JobState
from ops.health import CHECK_NAMES
from services.models import DispatcherState
from tests.corpora.helpers import activated, imported
from tests.support import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.tcp]
MB = 1024 * 1024


def _checks(body: dict) -> dict[str, dict]:
    return {check["name"]: check for check in body["checks"]}


def _health(authed) -> dict:
    response = authed.get("/api/health")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def dispatcher_ports(settings) -> tuple[int, int]:
    """Free ports with nothing listening, so no dispatcher another test or process runs is seen."""
    settings.DISPATCHER_HOST = "127.0.0.1"
    settings.DISPATCHER_VENTILATOR_PORT = free_port()
    settings.DISPATCHER_SINK_PORT = free_port()
    return settings.DISPATCHER_VENTILATOR_PORT, settings.DISPATCHER_SINK_PORT


@pytest.fixture
def listening(dispatcher_ports) -> Iterator[None]:
    """Real TCP listeners on both dispatcher ports."""
    sockets = []
    for port in dispatcher_ports:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        sockets.append(sock)
    yield
    for sock in sockets:
        sock.close()


def _alive(seconds_ago: float = 0) -> DispatcherState:
    at = timezone.now() - timedelta(seconds=seconds_ago)
    return DispatcherState.objects.create(started_at=at, heartbeat_at=at, pid=4242)


def test_health_needs_a_token(api):
    response = api.get("/api/health")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/problem+json")


def test_health_reports_every_check_with_a_remediation_for_each_that_is_not_ok(authed, dispatcher_ports):
    body = _health(authed)
    checks = _checks(body)
    assert list(checks) == CHECK_NAMES
    for check in checks.values():
        assert check["status"] in ("ok", "warning", "problem")
        if check["status"] == "ok":
            assert check["remediation"] is None
        else:
            assert check["remediation"], check
    rank = {"ok": 0, "warning": 1, "problem": 2}
    assert body["status"] == max((c["status"] for c in checks.values()), key=rank.__getitem__)
    assert checks["postgresql"]["status"] == "ok" and checks["postgresql"]["details"]["version"]
    assert checks["redis"]["status"] == "ok" and checks["redis"]["details"]["version"]
    assert checks["database_pool"]["details"]["pool"] in (True, False)
    assert body["status"] == "problem"  # no dispatcher runs on the free ports


def test_a_dispatcher_that_never_ran_is_a_problem_with_its_remediation(authed, dispatcher_ports):
    DispatcherState.objects.all().delete()
    check = _checks(_health(authed))["dispatcher"]
    assert check["status"] == "problem"
    assert check["summary"] == "no dispatcher has run"
    assert "Start the dispatcher" in check["remediation"]


def test_a_stale_dispatcher_heartbeat_is_a_problem_with_its_remediation(authed, listening):
    _alive(seconds_ago=600)
    check = _checks(_health(authed))["dispatcher"]
    assert check["status"] == "problem"
    assert "no heartbeat" in check["summary"] and "process 4242" in check["summary"]
    assert "Start the dispatcher" in check["remediation"] and "hung" in check["remediation"]


def test_a_dispatcher_whose_ports_are_closed_is_a_problem_with_its_remediation(authed, dispatcher_ports):
    _alive()
    check = _checks(_health(authed))["dispatcher"]
    assert check["status"] == "problem"
    ventilator, sink = dispatcher_ports
    assert f"127.0.0.1:{ventilator}" in check["summary"] and f"127.0.0.1:{sink}" in check["summary"]
    assert check["details"]["ventilator_reachable"] is False and check["details"]["sink_reachable"] is False
    assert "DISPATCHER_VENTILATOR_PORT" in check["remediation"]


def test_a_live_dispatcher_with_open_ports_is_ok(authed, listening):
    _alive()
    check = _checks(_health(authed))["dispatcher"]
    assert check["status"] == "ok", check
    assert check["remediation"] is None
    assert check["details"]["ventilator_reachable"] is True and check["details"]["sink_reachable"] is True


def test_an_unwritable_results_directory_is_a_problem_with_its_remediation(authed, settings, tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings.RESULTS_DIR = blocker / "results"  # below a regular file: no user, root included, can write it
    check = _checks(_health(authed))["results_dir"]
    assert check["status"] == "problem"
    assert check["details"]["writable"] is False and check["details"]["exists"] is False
    assert str(settings.RESULTS_DIR) in check["remediation"] and "RESULTS_DIR" in check["remediation"]


def test_a_writable_results_directory_and_export_root_are_ok_and_left_clean(authed, settings, tmp_path: Path):
    settings.RESULTS_DIR = tmp_path / "results"
    settings.RESULTS_DIR.mkdir()
    settings.EXPORT_ROOT = tmp_path / "exports"  # absent, under a writable parent: created on first use
    checks = _checks(_health(authed))
    assert checks["results_dir"]["status"] == "ok" and checks["results_dir"]["details"]["writable"] is True
    assert checks["export_root"]["status"] == "ok" and checks["export_root"]["details"]["exists"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]
    assert list(settings.RESULTS_DIR.iterdir()) == []


def test_a_results_disk_below_its_minimum_is_a_problem_that_says_to_free_space_and_near_it_a_warning(
    authed, settings, tmp_path: Path
):
    settings.RESULTS_DIR = tmp_path
    free = shutil.disk_usage(tmp_path).free // MB  # a real reading (other processes write to the disk too)
    settings.RESULTS_MIN_FREE_MB = free + 1024
    check = _checks(_health(authed))["results_dir"]
    assert check["status"] == "problem", check
    assert re.match(rf"results disk full: \d+ MB free under {tmp_path}, below RESULTS_MIN_FREE_MB \({free + 1024}\)",
                    check["summary"]), check  # fmt: skip
    assert "the sink takes no result" in check["summary"]
    assert check["remediation"].startswith(f"Free space under {tmp_path}")
    assert "RESULTS_MIN_FREE_MB" in check["remediation"]
    assert check["details"]["min_free_bytes"] == settings.RESULTS_MIN_FREE_MB * MB

    settings.RESULTS_MIN_FREE_MB = free * 2 // 3  # free is half as much again
    check = _checks(_health(authed))["results_dir"]
    assert check["status"] == "warning" and "the sink stops taking results below it" in check["summary"]
    settings.RESULTS_MIN_FREE_MB = 0
    assert _checks(_health(authed))["results_dir"]["details"]["held_since"] is None


def test_an_unreadable_corpus_root_is_a_problem(authed, settings, tmp_path: Path):
    settings.CORPUS_ROOTS = [tmp_path, tmp_path / "missing"]
    check = _checks(_health(authed))["corpus_roots"]
    assert check["status"] == "problem"
    assert str(tmp_path / "missing") in check["summary"]
    readable = {root["path"]: root["readable"] for root in check["details"]["roots"]}
    assert readable == {str(tmp_path): True, str(tmp_path / "missing"): False}
    assert check["details"]["roots"][0]["free_bytes"] > 0


def test_expired_leases_are_counted(authed, corpus_root: Path):
    imported(corpus_root, "c", documents=5)
    activated("c")
    assert _checks(_health(authed))["expired_leases"]["details"]["expired"] == 0
    tasks = list(Task.objects.filter(corpus__name="c", service__name="tex_to_html").order_by("id"))
    past, future = timezone.now() - timedelta(minutes=5), timezone.now() + timedelta(minutes=5)
    Task.objects.filter(pk__in=[t.pk for t in tasks[:3]]).update(status=77, leased_until=past)
    Task.objects.filter(pk=tasks[3].pk).update(status=77, leased_until=future)
    check = _checks(_health(authed))["expired_leases"]
    assert check["details"]["expired"] == 3
    assert check["status"] == "warning" and "dispatcher" in check["remediation"]


def test_stalled_jobs_are_a_problem_and_the_backlog_is_counted(authed, settings):
    settings.JOB_STALL_SECONDS = 60
    old = timezone.now() - timedelta(minutes=10)
    Job.objects.create(kind="test_stalled", actor="tester", state=JobState.RUNNING, heartbeat_at=old)
    Job.objects.create(kind="test_waiting", actor="tester", state=JobState.QUEUED)
    check = _checks(_health(authed))["jobs"]
    assert check["details"]["queued"] == 1 and check["details"]["running"] == 1
    assert check["details"]["stalled"] == 1
    assert check["status"] == "problem" and "test_stalled" in check["summary"]
    assert "job worker" in check["remediation"]


def test_the_health_screen_renders_the_same_dto_as_the_api(screen_client, authed, dispatcher_ports):
    assert screen_client.get("/health").status_code == 200
    screen = screen_client.get("/health").context["health"]
    api = _health(authed)
    plain = json.loads(json.dumps(screen, default=str))

    def stable(body: dict) -> list:
        # Free bytes and heartbeat ages move between two calls; names, statuses and remediations do not.
        return [(c["name"], c["status"], c["remediation"], sorted(c["details"])) for c in body["checks"]]

    assert plain["status"] == api["status"] and stable(plain) == stable(api)
    body = screen_client.get("/health").content.decode()
    assert 'data-check="dispatcher"' in body and "Start the dispatcher" in body


def test_the_health_screen_needs_sign_in(client):
    response = client.get("/health")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_the_expired_lease_count_can_use_the_partial_index(django_assert_num_queries):
    from django.db import connection

    from ops.health import expired_leases_check

    with django_assert_num_queries(1) as captured:
        expired_leases_check()
    sql = captured.captured_queries[0]["sql"]
    with connection.cursor() as cursor:
        # On the test's empty table another index on status ties in cost with the partial one, and the
        # planner's pick between them is arbitrary: drop the other indexes (rolled back with the test) so
        # only "can the partial index serve this query" decides the plan.
        cursor.execute(
            "SELECT i.indexrelid::regclass::text FROM pg_index i WHERE i.indrelid = 'corpora_task'::regclass"
            " AND i.indexrelid <> 'task_leased_until'::regclass"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)"
        )
        for (index,) in cursor.fetchall():
            cursor.execute(f"DROP INDEX {index}")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "task_leased_until" in plan, plan
