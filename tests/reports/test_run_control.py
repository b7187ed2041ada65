from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from corpora.models import Task
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db


def _statuses(corpus: str) -> list[int]:
    return sorted(
        Task.objects.filter(corpus__name=corpus, service__name="tex_to_html").values_list("status", flat=True)
    )


def test_pause_blocks_todo_and_leased_tasks_of_the_pair_only(authed, corpus_root):
    imported(corpus_root, "a", documents=4)
    imported(corpus_root, "b", documents=2)
    activated("a")
    activated("b")
    ids = list(Task.objects.filter(corpus__name="a", service__name="tex_to_html").values_list("pk", flat=True))
    Task.objects.filter(pk=ids[0]).update(status=12345)  # leased
    Task.objects.filter(pk=ids[1]).update(status=-2)  # done: a result is never blocked
    body = authed.post("/api/reports/a/tex_to_html/pause").json()
    assert body == {"corpus": "a", "service": "tex_to_html", "action": "pause", "blocked": 3}
    assert _statuses("a") == [-6, -6, -6, -2]
    assert _statuses("b") == [0, 0]
    resumed = authed.post("/api/reports/a/tex_to_html/resume").json()
    assert resumed["resumed"] == 3 and _statuses("a") == [-2, 0, 0, 0]


def test_the_fleet_wide_pause_and_resume_cover_every_pair(authed, corpus_root):
    imported(corpus_root, "a", documents=2)
    imported(corpus_root, "b", documents=3)
    activated("a")
    activated("b")
    assert authed.post("/api/conversions/pause").json()["blocked"] == 5
    import_statuses = set(Task.objects.filter(service__name="import").values_list("status", flat=True))
    assert import_statuses == {-1}  # finished import tasks are untouched
    detail = authed.get("/api/corpora/b").json()["services"][1]["counts"]
    assert detail["blocked"] == 3 and detail["in_progress"] == 0
    assert authed.post("/api/conversions/resume").json()["resumed"] == 5
    assert authed.post("/api/conversions/resume").json()["resumed"] == 0


def test_pause_and_resume_need_a_token_and_known_names(authed, corpus_root):
    imported(corpus_root, "a")
    activated("a")
    anonymous = APIClient()
    for path in ("/api/reports/a/tex_to_html/pause", "/api/conversions/pause", "/api/conversions/resume"):
        assert anonymous.post(path).status_code == 401
    assert authed.post("/api/reports/nope/tex_to_html/pause").status_code == 404
    assert authed.post("/api/reports/a/nope/resume").status_code == 404
    assert set(_statuses("a")) == {0}


def test_workers_are_listed_per_service_with_their_tallies(authed, corpus_root):
    from django.utils import timezone

    from services.actions import service_register
    from services.models import Service, Worker

    service_register(name="tex_to_html", actor="t")
    service = Service.objects.get(name="tex_to_html")
    now = timezone.now()
    Worker.objects.create(
        identity="host-a:1", service=service, dispatched=10, returned=7, first_seen=now, last_seen=now
    )
    rows = authed.get("/api/services/tex_to_html/workers").json()
    assert [(r["identity"], r["dispatched"], r["returned"], r["in_flight"]) for r in rows] == [("host-a:1", 10, 7, 3)]
    assert APIClient().get("/api/services/tex_to_html/workers").status_code == 401
    assert authed.get("/api/services/nope/workers").status_code == 404


def test_the_workers_screen_shows_the_same_records(authed, screen_client, corpus_root):
    import json

    from django.utils import timezone

    from services.actions import service_register
    from services.models import Service, Worker

    service_register(name="tex_to_html", actor="t")
    now = timezone.now()
    Worker.objects.create(
        identity="h:2", service=Service.objects.get(name="tex_to_html"), dispatched=1, returned=1, first_seen=now,
        last_seen=now,
    )  # fmt: skip
    screen = screen_client.get("/services/tex_to_html/workers")
    assert json.loads(json.dumps(screen.context["workers"])) == authed.get("/api/services/tex_to_html/workers").json()


def test_pause_and_resume_called_directly_are_journaled_as_from_the_api(corpus_root):
    from accounts.models import AuditEntry
    from config.errors import NotFound
    from corpora.actions.reports import conversions_pause, run_control

    imported(corpus_root, "a", documents=2)
    activated("a")
    assert conversions_pause(corpus_name="a", service_name="tex_to_html", actor="job") == 2
    assert run_control(action="resume", actor="shell")["resumed"] == 2
    with pytest.raises(NotFound):
        conversions_pause(corpus_name="a", service_name="nope", actor="shell")
    rows = AuditEntry.objects.filter(action__startswith="conversions.").order_by("id")
    assert list(rows.values_list("action", "actor", "target", "status_code")) == [
        ("conversions.pause", "job", "a/tex_to_html", None),
        ("conversions.resume", "shell", "", None),
        ("conversions.pause", "shell", "a/nope", 404),
    ]
