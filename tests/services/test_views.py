"""The services screens: twins of /api/services, writes through the same actions, journaled."""

from __future__ import annotations

import json
import re

import pytest

from accounts.models import AuditEntry
from corpora.models import Task
from services.actions import service_lease_set, service_register
from services.models import Service
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))


def test_the_services_screens_render_the_same_dtos_as_the_api(screen_client, authed, corpus_root):
    imported(corpus_root, "alpha")
    activated("alpha", "tex_to_html")
    service_register(name="other", actor="tester", lease_seconds=60)
    screen = screen_client.get("/services")
    assert screen.status_code == 200
    assert _plain(screen.context["services"]) == authed.get("/api/services").json()
    assert [s["name"] for s in screen.context["services"]] == ["import", "init", "other", "tex_to_html"]
    for name in ("tex_to_html", "other", "import"):
        detail = screen_client.get(f"/services/{name}")
        assert _plain(detail.context["service"]) == authed.get(f"/api/services/{name}").json()


def test_the_services_screens_need_a_signed_in_user(client):
    service_register(name="tex_to_html", actor="tester")
    for method, url, data in (
        ("get", "/services", {}),
        ("post", "/services", {"name": "new_one"}),
        ("get", "/services/tex_to_html", {}),
        ("post", "/services/tex_to_html/lease", {"seconds": "30"}),
        ("post", "/services/tex_to_html/profile", {"preset": "arxiv"}),
        ("get", "/services/tex_to_html/delete", {}),
        ("post", "/services/tex_to_html/delete", {"confirm": "tex_to_html"}),
    ):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and response["Location"].startswith("/login"), url
    service = Service.objects.get(name="tex_to_html")
    assert service.lease_seconds is None and not Service.objects.filter(name="new_one").exists()
    assert service.profile["pmml"] is False


def test_the_register_form_registers_a_journaled_service(screen_client):
    form = {"name": "tex_to_html", "version": "", "inputformat": "tex", "outputformat": "html",
            "command": "latexmlc", "description": "", "lease_seconds": ""}  # fmt: skip
    response = screen_client.post("/services", form, follow=True)
    assert response.redirect_chain == [("/services/tex_to_html", 302)]
    assert "The service tex_to_html is registered" in response.content.decode()
    service = Service.objects.get(name="tex_to_html")
    assert service.command == "latexmlc" and service.version == "0.1" and service.lease_seconds is None
    entry = AuditEntry.objects.get(action="service.register", target="tex_to_html")
    assert entry.actor == "tester" and entry.outcome == "ok"


def test_the_register_form_answers_with_the_apis_errors_and_status(screen_client, authed):
    bad_name = screen_client.post("/services", {"name": "no/slash"})
    assert bad_name.status_code == 400 and "Not a valid name" in bad_name.content.decode()
    zero_lease = screen_client.post("/services", {"name": "ok_name", "lease_seconds": "0"})
    assert zero_lease.status_code == 400
    assert zero_lease.context["errors"]["lease_seconds"] == ["Ensure this value is greater than or equal to 1."]
    service_register(name="taken", actor="tester")
    taken = screen_client.post("/services", {"name": "taken"})
    assert taken.status_code == 409 == authed.post("/api/services", {"name": "taken"}, format="json").status_code
    assert "exists already" in taken.content.decode()
    assert not Service.objects.filter(name__in=["no/slash", "ok_name"]).exists()
    assert AuditEntry.objects.filter(action="service.register", actor="tester", status_code=400).count() == 2


def test_the_register_form_takes_a_preset(screen_client):
    response = screen_client.post("/services", {"name": "ar5iv", "profile": "arxiv"})
    assert response.status_code == 302 and Service.objects.get(name="ar5iv").profile["mathtex"] is True
    refused = screen_client.post("/services", {"name": "other", "profile": "ar5iv"})
    assert refused.status_code == 400 and "no preset is named &#x27;ar5iv&#x27;" in refused.content.decode()
    assert "profile" in refused.context["errors"] and not Service.objects.filter(name="other").exists()


def test_the_profile_forms_set_a_preset_or_options_and_the_page_shows_the_apis_profile(screen_client, authed):
    from conversion.profiles import PRESETS, Profile

    service_register(name="tex_to_html", actor="tester")
    page = screen_client.get("/services/tex_to_html").content.decode()
    assert (
        'id="profile-preset"' in page and 'id="profile-options"' in page and "preset <strong>default</strong>" in page
    )
    response = screen_client.post("/services/tex_to_html/profile", {"preset": "arxiv"}, follow=True)
    assert "tex_to_html now converts with the preset arxiv" in response.content.decode()
    assert Service.objects.get(name="tex_to_html").profile == PRESETS["arxiv"].profile.as_json()
    detail = screen_client.get("/services/tex_to_html")
    assert _plain(detail.context["service"]) == authed.get("/api/services/tex_to_html").json()
    assert detail.context["profile_form"]["preloads"] == PRESETS["arxiv"].profile.preloads[0]
    assert PRESETS["arxiv"].profile.digest in detail.content.decode()
    form = {"options": "1", "engine": "latexmlc", "preloads": "[ids]latexml.sty\r\n\r\namsmath.sty", "pmml": "on",
            "nodefaultresources": "on", "css": "", "paths": "", "timeout_seconds": "600", "memory_mb": ""}  # fmt: skip
    response = screen_client.post("/services/tex_to_html/profile", form, follow=True)
    expected = Profile(preloads=("[ids]latexml.sty", "amsmath.sty"), pmml=True, nodefaultresources=True,
                       timeout_seconds=600)  # fmt: skip
    assert f"a profile of its own ({expected.digest[:12]})" in response.content.decode()
    assert Service.objects.get(name="tex_to_html").profile == expected.as_json()
    entries = AuditEntry.objects.filter(action="service.profile", target="tex_to_html", actor="tester", outcome="ok")
    assert entries.count() == 2


@pytest.mark.parametrize(
    ("field", "typed", "option", "message"),
    [
        ("preloads", "[ids]latexml.sty;rm", "preloads", "is not a binding to preload"),
        ("css", "/etc/passwd", "css", "outside the profile roots"),
        ("engine", "latexmlc --strict", "engine", "an engine is a program"),
        ("timeout_seconds", "ten", "timeout_seconds", "A valid integer is required."),
        ("memory_mb", "1", "memory_mb", "Ensure this value is greater than or equal to 64."),
    ],
)
def test_the_profile_form_answers_a_bad_option_with_the_apis_400_naming_it(
    screen_client, authed, settings, tmp_path, field, typed, option, message
):
    settings.PROFILE_ROOTS = [tmp_path]
    service_register(name="tex_to_html", actor="tester", profile="arxiv")
    form = {"options": "1", "engine": "latexmlc", "preloads": "", "css": "", "paths": "", "timeout_seconds": "",
            "memory_mb": "", field: typed}  # fmt: skip
    response = screen_client.post("/services/tex_to_html/profile", form)
    assert response.status_code == 400
    assert list(response.context["profile_errors"]) == [option] and message in response.content.decode()
    assert response.context["profile_form"][field] == typed  # shown back in the form
    body = {"engine": "latexmlc", field: [typed] if field in ("preloads", "css") else typed}
    api = authed.put("/api/services/tex_to_html/profile", body, format="json")
    assert api.status_code == 400 and list(api.json()["errors"]) == [option]
    assert Service.objects.get(name="tex_to_html").profile["pmml"] is True  # the preset it had, unchanged


def test_the_lease_form_sets_and_clears_the_override(screen_client):
    service_register(name="tex_to_html", actor="tester")
    response = screen_client.post("/services/tex_to_html/lease", {"seconds": "300"})
    assert response.status_code == 302 and response["Location"] == "/services/tex_to_html"
    assert Service.objects.get(name="tex_to_html").lease_seconds == 300
    assert screen_client.get("/services/tex_to_html").context["service"]["effective_lease_seconds"] == 300

    cleared = screen_client.post("/services/tex_to_html/lease", {"seconds": ""}, follow=True)
    assert "Lease of tex_to_html: cleared" in cleared.content.decode()
    assert Service.objects.get(name="tex_to_html").lease_seconds is None
    entries = AuditEntry.objects.filter(action="service.lease", target="tex_to_html", actor="tester", outcome="ok")
    assert sorted(entries.values_list("params", flat=True), key=str) == [{"seconds": 300}, {"seconds": None}]


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("0", "Ensure this value is greater than or equal to 1."),
        ("-5", "Ensure this value is greater than or equal to 1."),
        ("abc", "must be a positive whole number, or null"),
        ("5.0", "must be a positive whole number, or null"),
        ("9" * 40, "must be a positive whole number, or null"),
    ],
)
def test_the_lease_form_refuses_what_is_not_positive_whole_seconds(screen_client, typed, message):
    service_register(name="tex_to_html", actor="tester")
    service_lease_set(name="tex_to_html", seconds=120, actor="tester")
    response = screen_client.post("/services/tex_to_html/lease", {"seconds": typed})
    assert response.status_code == 400 and message in response.content.decode()
    assert response.context["seconds"] == typed  # shown back in the field
    assert Service.objects.get(name="tex_to_html").lease_seconds == 120


def test_the_lease_form_of_an_unknown_service_is_a_404(screen_client):
    assert screen_client.post("/services/nope/lease", {"seconds": "abc"}).status_code == 404
    assert screen_client.post("/services/nope/profile", {"preset": "arxiv"}).status_code == 404
    assert screen_client.get("/services/nope").status_code == 404
    assert screen_client.get("/services/nope/delete").status_code == 404


def test_deleting_a_service_needs_its_name_typed(screen_client, corpus_root):
    imported(corpus_root, "alpha", documents=2)
    activated("alpha", "tex_to_html")
    assert 'href="/services/tex_to_html/delete"' in screen_client.get("/services/tex_to_html").content.decode()
    page = screen_client.get("/services/tex_to_html/delete")
    assert page.status_code == 200 and "Type <code>tex_to_html</code> to confirm" in page.content.decode()

    wrong = screen_client.post("/services/tex_to_html/delete", {"confirm": "tex"})
    assert wrong.status_code == 400 and "confirm=tex_to_html" in wrong.content.decode()
    assert Task.objects.filter(service__name="tex_to_html").count() == 2

    right = screen_client.post("/services/tex_to_html/delete", {"confirm": "tex_to_html"}, follow=True)
    assert right.redirect_chain == [("/services", 302)]
    assert "The service tex_to_html was deleted" in right.content.decode()
    assert not Service.objects.filter(name="tex_to_html").exists()
    assert Task.objects.filter(corpus__name="alpha", service__name="import").count() == 2
    outcomes = AuditEntry.objects.filter(action="service.delete", target="tex_to_html", actor="tester")
    assert sorted(outcomes.values_list("outcome", flat=True)) == ["400 Bad request", "ok"]


def test_a_protected_service_offers_no_delete_and_refuses_one_with_403(screen_client):
    detail = screen_client.get("/services/import").content.decode()
    assert "/services/import/delete" not in detail
    page = screen_client.get("/services/import/delete").content.decode()
    assert 'id="confirm-delete"' not in page and "protected infrastructure service" in page
    refused = screen_client.post("/services/import/delete", {"confirm": "import"})
    assert refused.status_code == 403 and "cannot be deleted" in refused.content.decode()
    assert Service.objects.filter(name="import").exists()


def test_the_workers_screen_shows_the_heartbeat_fields_of_the_api_records(screen_client, authed):
    from django.utils import timezone

    from services.models import Worker

    service_register(name="tex_to_html", actor="tester")
    service = Service.objects.get(name="tex_to_html")
    now = timezone.now()
    Worker.objects.create(
        identity="beating:1", service=service, dispatched=5, returned=5, first_seen=now, last_seen=now,
        conversions=5, peak_rss=432_013_312, kills={"governor": 3, "disk": 1}, heartbeat_at=now,
    )  # fmt: skip
    Worker.objects.create(identity="cortex:2", service=service, first_seen=now, last_seen=now)
    records = authed.get("/api/services/tex_to_html/workers").json()
    for fragment in ({}, {"fragment": "rows"}):
        screen = screen_client.get("/services/tex_to_html/workers", fragment)
        assert _plain(screen.context["workers"]) == records
        rows = dict(re.findall(r'<tr data-worker="([^"]+)">(.*?)</tr>', screen.content.decode(), re.S))
        beating = " ".join(re.sub(r"<[^>]+>", " ", rows["beating:1"]).replace("\xa0", " ").split())
        assert "5 412.0 MB disk 1 · governor 3" in beating, beating  # conversions, peak, kills in their order
        assert "no heartbeat" not in beating and "timeout" not in beating
        cortex = " ".join(re.sub(r"<[^>]+>", " ", rows["cortex:2"]).split())
        assert cortex.endswith("no heartbeat \N{EN DASH}") and "MB" not in cortex and "bytes" not in cortex, cortex
