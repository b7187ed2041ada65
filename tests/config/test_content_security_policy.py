"""The screens send a Content-Security-Policy that allows only our own static files (htmx is one of
them), and nothing in the templates needs more: no inline script, style or event attribute."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config.middleware import SCREEN_CSP

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.mark.parametrize(
    "path", ["/corpora", "/services", "/jobs", "/maintenance", "/audit", "/login", "/corpora/new", "/passkeys"]
)
def test_every_screen_sends_the_policy(screen_client, path):
    response = screen_client.get(path)
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == SCREEN_CSP


def test_error_pages_of_the_screens_send_it_too(screen_client):
    response = screen_client.get("/corpora/nope")
    assert response.status_code == 404 and response["Content-Security-Policy"] == SCREEN_CSP


def test_the_policy_allows_only_this_origin():
    directives = dict(part.strip().split(" ", 1) for part in SCREEN_CSP.split(";"))
    for name in ("default-src", "script-src", "style-src", "img-src", "connect-src"):
        assert directives[name] == "'self'", name
    assert "unsafe" not in SCREEN_CSP and "*" not in SCREEN_CSP and "http" not in SCREEN_CSP


def test_the_api_and_its_docs_are_left_alone(api):
    assert "Content-Security-Policy" not in api.get("/api/jobs")
    assert "Content-Security-Policy" not in api.get("/api/docs")


def test_no_template_holds_inline_script_style_or_event_handlers():
    offences = []
    for template in TEMPLATES.rglob("*.html"):
        text = template.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)[^>]*>", r"<style\b", r"\sstyle=", r"\son[a-z]+=", r"javascript:"):
            offences += [f"{template.relative_to(TEMPLATES)}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert offences == []
