from __future__ import annotations

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


def _write_views() -> list[type]:
    """Every token-gated API view class that has a write method."""
    from django.urls import URLResolver, get_resolver

    from accounts.api_base import TokenApiView

    found, stack = set(), list(get_resolver().url_patterns)
    while stack:
        pattern = stack.pop()
        if isinstance(pattern, URLResolver):
            stack.extend(pattern.url_patterns)
            continue
        view = getattr(pattern.callback, "view_class", None)
        if (
            view
            and issubclass(view, TokenApiView)
            and any(hasattr(view, m) for m in ("post", "put", "patch", "delete"))
        ):
            found.add(view)
    return sorted(found, key=lambda view: view.__name__)


def test_every_api_write_is_journaled_under_a_name_from_the_registry():
    from accounts.journal import Action

    views = _write_views()
    assert len(views) >= 10
    for view in views:
        methods = [m.upper() for m in ("post", "put", "patch", "delete") if hasattr(view, m)]
        for method in methods:
            name = view.audit_actions.get(method, view.audit_action)
            assert isinstance(name, Action), f"{view.__name__}.{method} journals as {name!r}"


def test_no_module_names_a_journaled_write_with_a_literal_or_writes_the_journal_itself():
    """Screens, commands and API views take names from accounts.journal; only the journal's own module
    and the API base class write entries."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    literal = re.compile(
        r"""\baudit_action\s*=\s*["']|\baudit_actions\s*=\s*\{[^}]*:\s*["']"""
        r"""|\bjournaled\([^)]*\baction\s*=\s*["']|\bwrite_action\(\s*["']"""
    )
    offenders = []
    for path in root.glob("*/**/*.py"):
        relative = path.relative_to(root).as_posix()
        if relative.split("/")[0] in {"tests", "bench"} or "/migrations/" in relative:
            continue
        text = path.read_text()
        offenders += [f"{relative}: {match[0]}" for match in literal.finditer(text)]
        if "audit_record(" in text and relative not in {"accounts/actions.py", "accounts/api_base.py"}:
            offenders.append(f"{relative}: audit_record")
    assert offenders == []


def test_deactivation_is_one_name_on_the_api_the_screen_and_the_command(authed, screen_client, corpus_root):
    from django.core.management import call_command

    from tests.corpora.helpers import activated, imported

    for name in ("a1", "a2", "a3"):
        imported(corpus_root, name, documents=1)
        activated(name)
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
