from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from accounts.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_an_authenticated_write_is_journaled_with_actor_target_and_request_id(authed):
    response = authed.post("/api/maintenance/analyze", HTTP_X_REQUEST_ID="req-123")
    assert response.status_code == 202
    entry = AuditEntry.objects.get(action="maintenance.analyze")
    assert entry.actor == "tester"
    assert entry.outcome == "ok" and entry.status_code == 202
    assert entry.request_id == "req-123"
    assert response["X-Request-ID"] == "req-123"


def test_the_token_in_a_query_string_is_never_journaled(api, token):
    api.post(f"/api/maintenance/analyze?token={token}&note=hi")
    entry = AuditEntry.objects.get(action="maintenance.analyze")
    assert token not in str(entry.params)
    assert entry.params == {"note": "hi"}


def test_an_unauthenticated_write_is_refused_and_not_attributed(api):
    response = api.post("/api/maintenance/analyze")
    assert response.status_code == 401
    assert not AuditEntry.objects.filter(action="maintenance.analyze").exists()


def test_the_journal_lists_newest_first_and_filters(authed):
    authed.post("/api/maintenance/analyze")
    authed.post("/api/maintenance/reindex")
    rows = authed.get("/api/audit").json()
    actions = [row["action"] for row in rows]
    assert actions.index("maintenance.reindex") < actions.index("maintenance.analyze")
    only = authed.get("/api/audit", {"action": "maintenance.analyze"}).json()
    assert {row["action"] for row in only} == {"maintenance.analyze"}


def test_the_journal_is_token_gated(api):
    assert api.get("/api/audit").status_code == 401


def test_the_journal_screen_shows_the_same_entries_as_the_api(authed, screen_client):
    authed.post("/api/maintenance/analyze")
    api_rows = authed.get("/api/audit").json()
    screen = screen_client.get("/audit")
    assert screen.status_code == 200
    assert list(screen.context["entries"]) == api_rows


def test_a_revoked_token_ends_the_screen_session(screen_client, token):
    from django.core.management import call_command

    assert screen_client.get("/jobs").status_code == 200
    call_command("revoke_token", "--prefix", token[:12])
    response = screen_client.get("/jobs")
    assert response.status_code == 302 and response["Location"].startswith("/login")


def test_screens_refuse_a_wrong_token_at_sign_in(client, db):
    response = client.post("/login", {"token": "ccs_nope"})
    assert response.status_code == 401
    assert b"not valid" in response.content


# --- one journaling path, each name defined once ------------------------------------------------------


ROOT = Path(__file__).resolve().parents[2]


def _write_routes() -> list[tuple[str, str]]:
    """(method, path) of every token-gated API write, its path parameters filled with names of nothing."""
    from django.urls import URLResolver, get_resolver

    from accounts.api_base import TokenApiView

    found, stack = set(), [(pattern, "/") for pattern in get_resolver().url_patterns]
    while stack:
        pattern, prefix = stack.pop()
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            stack.extend((inner, route) for inner in pattern.url_patterns)
            continue
        view = getattr(pattern.callback, "view_class", None)
        if view and issubclass(view, TokenApiView):
            path = re.sub(r"<int:\w+>", "987654", re.sub(r"<(?:(?:str|path):)?\w+>", "nope", route))
            found |= {(method, path) for method in ("post", "put", "patch", "delete") if hasattr(view, method)}
    return sorted(found)


def test_every_api_write_is_journaled_under_a_name_from_the_registry(authed):
    """Each write reaches its action, which journals it, even when what it names does not exist."""
    from accounts.choices import Action

    routes = _write_routes()
    assert len(routes) >= 15
    for method, path in routes:
        before = AuditEntry.objects.count()
        response = getattr(authed, method)(path, {}, format="json")
        assert response.status_code != 405, (method, path)
        entries = list(AuditEntry.objects.order_by("id")[before:])
        assert len(entries) == 1, (method, path, response.status_code)
        assert entries[0].action in set(Action) and entries[0].status_code == response.status_code, (method, path)


def _journaled_actions() -> list:
    """Every function decorated with accounts.actions.journaled in the product's modules."""
    import importlib
    import inspect

    found = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in {"tests", "bench"} or "@journaled(" not in path.read_text():
            continue
        module = importlib.import_module(".".join(relative.with_suffix("").parts).removesuffix(".__init__"))
        found += [f for _, f in inspect.getmembers(module, callable) if getattr(f, "__module__", "") == module.__name__]
    return [function for function in found if hasattr(function, "journal_name")]


def test_every_journal_name_is_the_name_of_one_write_action():
    from accounts.choices import Action

    names = Counter(function.journal_name for function in _journaled_actions())
    assert names == Counter(set(Action))


def test_no_module_spells_a_journal_name_or_writes_the_journal_itself():
    """Journal names are spelled in accounts/choices.py alone (migrations keep the names they renamed),
    and only the journal's own module writes entries."""
    from accounts.choices import Action

    literal = re.compile("[\"'](" + "|".join(re.escape(name) for name in Action) + ")[\"']")
    offenders = []
    for path in [*ROOT.glob("*/**/*.py"), *ROOT.glob("templates/**/*.html")]:
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {"tests", "bench"} or "/migrations/" in relative:
            continue
        text = path.read_text()
        if relative != "accounts/choices.py":
            offenders += [f"{relative}: {match[0]}" for match in literal.finditer(text)]
        if "audit_record(" in text and relative != "accounts/actions.py":
            offenders.append(f"{relative}: audit_record")
    assert offenders == []


def test_deactivation_is_one_name_on_the_api_the_screen_and_the_command(authed, screen_client, corpus_root):
    from django.core.management import call_command

    from tests.corpora.helpers import activated, imported

    for name in ("a1", "a2", "a3"):
        imported(corpus_root, name, documents=1)
        activated(name)
    AuditEntry.objects.all().delete()  # the set-up's own imports and activations are journaled too
    assert authed.delete("/api/corpora/a1/services/tex_to_html?confirm=tex_to_html").status_code == 204
    screen = screen_client.post("/corpora/a2/services/tex_to_html/deactivate", {"confirm": "tex_to_html"})
    assert screen.status_code == 302
    call_command("deactivate_service", "a3", "tex_to_html", "--confirm", "tex_to_html")
    targets = AuditEntry.objects.filter(action="service.deactivation", outcome="ok").values_list("target", flat=True)
    assert sorted(targets) == ["a1/tex_to_html", "a2/tex_to_html", "a3/tex_to_html"]
    assert not AuditEntry.objects.filter(action="service.activation", target__startswith="a").exists()


def test_a_failed_token_revocation_is_journaled_with_its_outcome():
    from accounts.actions import token_revoke
    from config.errors import NotFound

    with pytest.raises(NotFound):
        token_revoke(revoked_by="cli:op", actor="nobody")
    entry = AuditEntry.objects.get(action="token.revoke")
    assert (entry.actor, entry.target, entry.outcome, entry.status_code) == ("cli:op", "nobody", "404 Not found", 404)
