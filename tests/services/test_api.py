from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from corpora.models import LogMessage, Task
from services.models import Service
from tests.corpora.helpers import activated, imported
from tests.reports.messages import messages_add

pytestmark = pytest.mark.django_db


def test_registering_a_service_answers_201_with_the_record(authed):
    response = authed.post(
        "/api/services", {"name": "tex_to_html", "version": "0.8.8", "lease_seconds": 120}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "tex_to_html" and body["version"] == "0.8.8" and body["inputformat"] == "tex"
    assert body["lease_seconds"] == 120 and body["effective_lease_seconds"] == 120 and body["protected"] is False
    assert not Task.objects.exists()


def test_a_duplicate_service_is_409_and_bad_names_are_400(authed):
    authed.post("/api/services", {"name": "s"}, format="json")
    assert authed.post("/api/services", {"name": "s"}, format="json").status_code == 409
    for bad in ("a b", "x/y", "z" * 300, "", None):
        assert authed.post("/api/services", {"name": bad}, format="json").status_code == 400, bad
    assert authed.post("/api/services", {"name": "q", "lease_seconds": 0}, format="json").status_code == 400
    assert authed.post("/api/services", {"name": "q", "outputformat": "pdf"}, format="json").status_code == 400
    assert Service.objects.filter(name="q").count() == 0


def test_the_services_list_is_token_gated(authed):
    assert APIClient().get("/api/services").status_code == 401
    names = [row["name"] for row in authed.get("/api/services").json()]
    assert names == ["import", "init"]


def test_protected_services_cannot_be_deleted(authed):
    for name in ("init", "import"):
        response = authed.delete(f"/api/services/{name}?confirm={name}")
        assert response.status_code == 403 and response["Content-Type"] == "application/problem+json"
    assert Service.objects.filter(name__in=["init", "import"]).count() == 2


def test_deleting_a_service_removes_its_tasks_and_messages_in_every_corpus(authed, corpus_root):
    imported(corpus_root, "a")
    imported(corpus_root, "b")
    activated("a")
    activated("b")
    activated("a", service="keep")
    for task in Task.objects.filter(service__name__in=["tex_to_html", "keep"]):
        messages_add(task, ("warning", "c", "w", ""))
    assert authed.delete("/api/services/tex_to_html").status_code == 400
    assert authed.delete("/api/services/tex_to_html?confirm=keep").status_code == 400
    assert authed.delete("/api/services/tex_to_html?confirm=tex_to_html").status_code == 204
    assert not Service.objects.filter(name="tex_to_html").exists()
    assert set(Task.objects.values_list("service__name", flat=True)) == {"import", "keep"}
    assert set(LogMessage.objects.values_list("service__name", flat=True)) == {"keep"}
    assert authed.delete("/api/services/tex_to_html?confirm=tex_to_html").status_code == 404
    assert [s["name"] for s in authed.get("/api/corpora/a").json()["services"]] == ["import", "keep"]


def test_the_lease_override_is_set_and_cleared(authed, settings):
    settings.DISPATCHER_LEASE_SECONDS = 900
    authed.post("/api/services", {"name": "s"}, format="json")
    body = authed.put("/api/services/s/lease", {"seconds": 30}, format="json").json()
    assert (body["lease_seconds"], body["effective_lease_seconds"]) == (30, 30)
    body = authed.put("/api/services/s/lease", {"seconds": None}, format="json").json()
    assert (body["lease_seconds"], body["effective_lease_seconds"]) == (None, 900)


@pytest.mark.parametrize("seconds", [0, -5, "abc", "30", 1.5, True, [], {}])
def test_a_lease_that_is_not_positive_whole_seconds_is_400(authed, seconds):
    authed.post("/api/services", {"name": "s", "lease_seconds": 60}, format="json")
    response = authed.put("/api/services/s/lease", {"seconds": seconds}, format="json")
    assert response.status_code == 400, response.json()
    assert "seconds" in response.json()["errors"]
    assert Service.objects.get(name="s").lease_seconds == 60


def test_a_lease_body_without_seconds_or_for_an_unknown_service_is_refused(authed):
    authed.post("/api/services", {"name": "s"}, format="json")
    assert authed.put("/api/services/s/lease", {}, format="json").status_code == 400
    assert authed.put("/api/services/nope/lease", {"seconds": 5}, format="json").status_code == 404


def test_service_writes_are_journaled(authed):
    from accounts.models import AuditEntry

    authed.post("/api/services", {"name": "s"}, format="json")
    authed.put("/api/services/s/lease", {"seconds": 5}, format="json")
    authed.delete("/api/services/import?confirm=import")
    rows = list(AuditEntry.objects.order_by("id").values_list("action", "target", "status_code"))
    assert rows[-3:] == [("service.register", "s", 201), ("service.lease", "s", 200), ("service.delete", "import", 403)]


def test_service_actions_called_directly_are_journaled_as_from_the_api():
    from accounts.models import AuditEntry
    from config.errors import Forbidden
    from services.actions import service_delete, service_register

    service_register(name="direct", actor="shell", lease_seconds=60)
    with pytest.raises(Forbidden):
        service_delete(name="import", confirm="import", actor="shell")
    rows = AuditEntry.objects.filter(actor="shell").order_by("id").values_list("action", "target", "outcome", "params")
    assert list(rows) == [
        ("service.register", "direct", "ok", {"lease_seconds": 60}),
        ("service.delete", "import", "403 Forbidden", {"confirm": "import"}),
    ]


# --- converter profiles -------------------------------------------------------------------------------


def test_a_service_takes_a_preset_or_options_when_registered_and_shows_its_profile(authed):
    from conversion.profiles import DEFAULT, PRESETS, Profile

    plain = authed.post("/api/services", {"name": "plain"}, format="json").json()
    assert (plain["profile"], plain["profile_hash"], plain["profile_preset"]) == (
        DEFAULT.as_json(), DEFAULT.digest, "default",
    )  # fmt: skip
    arxiv = authed.post("/api/services", {"name": "ar5iv", "profile": "arxiv"}, format="json").json()
    assert (arxiv["profile"], arxiv["profile_preset"]) == (PRESETS["arxiv"].profile.as_json(), "arxiv")
    body = {"name": "own", "profile": {"preset": "arxiv", "timeout_seconds": 600, "cmml": False}}
    own = authed.post("/api/services", body, format="json").json()
    expected = Profile(**{**PRESETS["arxiv"].profile.__dict__, "timeout_seconds": 600, "cmml": False})
    assert (own["profile"], own["profile_hash"], own["profile_preset"]) == (expected.as_json(), expected.digest, None)
    assert Service.objects.get(name="own").profile == expected.as_json()
    assert authed.get("/api/services/own").json() == own


def test_the_presets_are_listed_with_their_profiles_and_hashes(authed, api):
    from conversion.profiles import PRESETS

    listed = authed.get("/api/profiles").json()
    assert [preset["name"] for preset in listed] == ["default", "arxiv"]
    for preset in listed:
        assert preset["profile"] == PRESETS[preset["name"]].profile.as_json()
        assert preset["profile_hash"] == PRESETS[preset["name"]].profile.digest
    assert "ar5iv.sty" in listed[1]["description"] and "no invisible times" in listed[1]["description"]
    assert APIClient().get("/api/profiles").status_code == 401


def test_a_profile_change_is_journaled_answered_with_the_service_and_noted_on_its_open_runs(authed, corpus_root):
    from accounts.models import AuditEntry
    from conversion.profiles import DEFAULT, PRESETS, Profile
    from corpora.models import Run

    imported(corpus_root, "alpha")
    activated("alpha", "tex_to_html")
    response = authed.put("/api/services/tex_to_html/profile", {"preset": "arxiv"}, format="json")
    assert response.status_code == 200 and response.json()["profile_preset"] == "arxiv"
    options = {"engine": "latexml-oxide", "nodefaultresources": True, "preloads": ["[ids,magnify=2]latexml.sty"]}
    changed = authed.put("/api/services/tex_to_html/profile", options, format="json").json()
    expected = Profile(engine="latexml-oxide", nodefaultresources=True, preloads=("[ids,magnify=2]latexml.sty",))
    assert (changed["profile"], changed["profile_hash"], changed["profile_preset"]) == (
        expected.as_json(), expected.digest, None,
    )  # fmt: skip
    run = Run.objects.get(corpus__name="alpha", service__name="tex_to_html", finished_at__isnull=True)
    assert (run.profile, run.profile_hash, run.engine) == (DEFAULT.as_json(), DEFAULT.digest, "latexmlc")
    assert run.profile_hashes == [DEFAULT.digest, PRESETS["arxiv"].profile.digest, expected.digest]
    # The same profile again changes nothing on the run.
    authed.put("/api/services/tex_to_html/profile", options, format="json")
    assert Run.objects.get(pk=run.pk).profile_hashes == run.profile_hashes
    entries = AuditEntry.objects.filter(action="service.profile", target="tex_to_html").order_by("id")
    assert [entry.status_code for entry in entries] == [200, 200, 200]
    assert entries[1].params["engine"] == "latexml-oxide" and entries[1].params["profile_hash"] == expected.digest
    listed = authed.get("/api/runs/alpha/tex_to_html").json()[0]
    assert listed["profile_changed"] is True and listed["profile_hashes"] == run.profile_hashes


@pytest.mark.parametrize(
    ("body", "option"),
    [
        ({"preloads": ["latexml.sty; rm -rf /"]}, "preloads"),
        ({"preloads": ["[nobibtex,shell=$(id)]latexml.sty"]}, "preloads"),
        ({"preloads": ["[notanoption]latexml.sty"]}, "preloads"),
        ({"engine": "latexmlc --strict"}, "engine"),
        ({"engine": "/usr/bin/latexmlc"}, "engine"),  # outside PROFILE_ROOTS (none are configured)
        ({"css": ["http://example.org/plain.css"]}, "css"),
        ({"css": ["/etc/passwd"]}, "css"),
        ({"paths": ["/usr/share/perl5/LaTeXML"]}, "paths"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"memory_mb": 10}, "memory_mb"),
        ({"pmml": "yes"}, "pmml"),
        ({"preset": "ar5iv"}, "preset"),
        ({"extra_args": ["--shell-escape"]}, "extra_args"),
        ({"pmml": True, "--preload": "x"}, "--preload"),
    ],
)
def test_a_bad_profile_is_a_400_problem_naming_the_option_and_changes_nothing(authed, body, option):
    authed.post("/api/services", {"name": "svc", "profile": "arxiv"}, format="json")
    before = Service.objects.get(name="svc").profile
    response = authed.put("/api/services/svc/profile", body, format="json")
    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    assert list(response.json()["errors"]) == [option], response.json()
    assert Service.objects.get(name="svc").profile == before
    registered = authed.post("/api/services", {"name": "other", "profile": body}, format="json")
    assert registered.status_code == 400 and list(registered.json()["errors"]["profile"]) == [option]
    assert not Service.objects.filter(name="other").exists()


def test_profile_paths_lie_inside_profile_roots_with_links_resolved(authed, settings, tmp_path):
    root = tmp_path / "profiles"
    (root / "bindings").mkdir(parents=True)
    (root / "ar5iv.css").write_text("body {}\n")
    (tmp_path / "elsewhere").mkdir()
    (root / "escape").symlink_to(tmp_path / "elsewhere")
    settings.PROFILE_ROOTS = [root]
    authed.post("/api/services", {"name": "svc"}, format="json")
    good = {"css": [str(root / "ar5iv.css"), "https://example.org/ar5iv.css"], "paths": [str(root / "bindings")]}
    assert authed.put("/api/services/svc/profile", good, format="json").status_code == 200
    assert Service.objects.get(name="svc").profile["paths"] == [str(root / "bindings")]
    escape = authed.put("/api/services/svc/profile", {"paths": [str(root / "escape")]}, format="json")
    assert escape.status_code == 400 and "outside the profile roots" in escape.json()["errors"]["paths"][0]
    climb = authed.put("/api/services/svc/profile", {"css": [f"{root}/../elsewhere/x.css"]}, format="json")
    assert climb.status_code == 400 and "without . or .. parts" in climb.json()["errors"]["css"][0]
    assert Service.objects.get(name="svc").profile["paths"] == [str(root / "bindings")]


def test_the_profile_of_an_unknown_or_protected_service_is_not_set(authed):
    assert authed.put("/api/services/nope/profile", {"preset": "arxiv"}, format="json").status_code == 404
    refused = authed.put("/api/services/import/profile", {"preset": "arxiv"}, format="json")
    assert refused.status_code == 403 and "converts nothing" in refused.json()["detail"]
    # The body is checked first: a bad one is a 400 whatever the service.
    assert authed.put("/api/services/nope/profile", {"pmml": 1}, format="json").status_code == 400


# --- workers ------------------------------------------------------------------------------------------


def _workers_of(service: str, *rows: dict) -> None:
    """Worker rows of a registered service, as the dispatcher would have written them."""
    from django.utils import timezone

    from services.actions import service_register
    from services.models import Worker

    service_register(name=service, actor="t")
    now = timezone.now()
    for row in rows:
        Worker.objects.create(service=Service.objects.get(name=service), first_seen=now, last_seen=now, **row)


def test_workers_show_their_heartbeats_conversions_peak_memory_and_kills_with_every_reason(authed):
    from datetime import UTC, datetime

    from conversion.choices import KillReason

    beat = datetime(2026, 11, 25, 3, 40, 12, tzinfo=UTC)
    _workers_of(
        "tex_to_html",
        {"identity": "beating:1", "dispatched": 9, "returned": 8, "conversions": 8, "peak_rss": 432_013_312,
         "kills": {"memory": 2, "timeout": 1}, "heartbeat_at": beat, "engine": "latexmlc",
         "engine_version": "latexmlc (LaTeXML version 0.8.7)"},
        {"identity": "cortex:2", "dispatched": 3, "returned": 3},
    )  # fmt: skip
    rows = {row["identity"]: row for row in authed.get("/api/services/tex_to_html/workers").json()}
    beating, cortex = rows["beating:1"], rows["cortex:2"]
    assert (beating["dispatched"], beating["returned"], beating["in_flight"]) == (9, 8, 1)  # unchanged fields
    assert (beating["conversions"], beating["peak_rss_bytes"]) == (8, 432_013_312)
    assert beating["kills"] == {"timeout": 1, "memory": 2, "processes": 0, "disk": 0, "governor": 0, "host_oom": 0}
    assert list(beating["kills"]) == list(KillReason)
    assert list(KillReason) == ["timeout", "memory", "processes", "disk", "governor", "host_oom"]
    assert beating["heartbeat_at"] == "2026-11-25T03:40:12Z"
    # A worker that sends no heartbeat (an unmodified CorTeX worker): zeros, every reason, and no heartbeat.
    assert (cortex["conversions"], cortex["peak_rss_bytes"], cortex["heartbeat_at"]) == (0, 0, None)
    assert cortex["kills"] == dict.fromkeys(KillReason, 0)
    assert (beating["engine"], beating["engine_version"]) == ("latexmlc", "latexmlc (LaTeXML version 0.8.7)")
    assert (cortex["engine"], cortex["engine_version"]) == (None, None)
    assert set(beating) == set(cortex) == {
        "identity", "service", "dispatched", "returned", "in_flight", "first_seen", "last_seen",
        "conversions", "peak_rss_bytes", "kills", "heartbeat_at", "engine", "engine_version", "converting",
    }  # fmt: skip
    assert beating["converting"] == cortex["converting"] == []


def test_workers_list_their_conversions_in_flight_with_elapsed_time_timeout_share_and_p99_flag(authed):
    """The in-flight rows the dispatcher wrote show on their worker's row: the document, since when, the share
    of its timeout, and a flag when it runs past the service's 99th percentile."""
    from datetime import timedelta

    from django.utils import timezone

    from services.models import InFlight

    _workers_of("tex_to_html", {"identity": "vm:1:0"}, {"identity": "vm:1:1"})
    service = Service.objects.get(name="tex_to_html")
    now = timezone.now()
    common = {"service": service, "corpus": "arxiv", "worker": "vm:1", "heartbeat_at": now, "timeout_seconds": 300.0}
    InFlight.objects.create(task_id=7, document="stuck", thread="vm:1:0", since=now - timedelta(seconds=150),
                            p99_ms=60_000, **common)  # fmt: skip
    InFlight.objects.create(task_id=8, document="quick", thread="vm:1:1", since=now - timedelta(seconds=3),
                            p99_ms=60_000, **common)  # fmt: skip
    rows = {row["identity"]: row for row in authed.get("/api/services/tex_to_html/workers").json()}
    (stuck,) = rows["vm:1:0"]["converting"]
    (quick,) = rows["vm:1:1"]["converting"]
    assert (stuck["task"], stuck["corpus"], stuck["document"], stuck["worker"]) == (7, "arxiv", "stuck", "vm:1:0")
    assert 150 <= stuck["elapsed_seconds"] < 200 and 0.5 <= stuck["timeout_share"] < 0.67
    assert (stuck["past_p99"], quick["past_p99"]) == (True, False)
    assert quick["elapsed_seconds"] < 60 and quick["document"] == "quick"


def test_kill_counts_keep_only_the_known_reasons_as_whole_numbers():
    from services.queries import kills_by_reason

    assert kills_by_reason({"disk": 3, "governor": 1, "gremlins": 7, "memory": "2", "timeout": True}) == {
        "timeout": 0, "memory": 0, "processes": 0, "disk": 3, "governor": 1, "host_oom": 0,
    }  # fmt: skip
    none = dict.fromkeys(("timeout", "memory", "processes", "disk", "governor", "host_oom"), 0)
    assert kills_by_reason(None) == kills_by_reason([]) == kills_by_reason({}) == none


def test_the_worker_list_takes_the_same_queries_for_one_worker_as_for_many():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from services.queries import worker_list
    from services.serializers import WorkerSerializer

    _workers_of("one", {"identity": "a:1"})
    _workers_of("many", *({"identity": f"b:{n}", "kills": {"disk": n}} for n in range(6)))
    counts = []
    for service in ("one", "many"):
        with CaptureQueriesContext(connection) as queries:
            records = WorkerSerializer(worker_list(service), many=True).data
        assert all(record["service"] == service for record in records)
        counts.append(len(queries))
    assert counts[0] == counts[1] == 3, counts  # the service, its workers with it, their conversions in flight
