"""The screens under their Content-Security-Policy in real headless Chromium: no page violates it, htmx
still polls, the bars are drawn to scale, and the rerun button still asks before it acts."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from corpora.models import Task
from jobs.models import Job, JobState
from tests.factories import JobFactory
from tests.screens.test_report_screens import converted  # noqa: F401  (the fixture: corpus c, converted)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCREENS = [
    "/corpora",
    "/corpora/c",
    "/reports/c/tex_to_html",
    "/reports/c/tex_to_html/error",
    "/corpora/c/services/tex_to_html/documents",
    "/corpus/c/tex_to_html/document/doc1/read",  # the reader: the screen's policy, the paper's in its frame
    "/runs",
    "/runs/c/tex_to_html",
    "/runs/c/tex_to_html/diff",
    "/runs/c/tex_to_html/tasks",
    "/services",
    "/services/tex_to_html/workers",
    "/jobs",
    "/maintenance",
    "/audit",
    # --- sessions ---
    "/sessions",
    # --- passkeys ---
    "/passkeys",
    "/health",  # detailed health
    "/config",
    "/logs",
    "/statistics",
]


def _violations(page: Any) -> list[str]:
    found: list[str] = []
    page.on("console", lambda m: found.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda error: found.append(f"page error: {error}"))
    return found


def _sign_in(page: Any, live_server: Any, token: str) -> None:
    page.goto(f"{live_server.url}/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/corpora")


def test_no_screen_violates_the_policy_and_htmx_runs(page, live_server, token, converted):  # noqa: F811
    violations = _violations(page)
    JobFactory(
        kind="maintenance_reindex", state=JobState.RUNNING, started_at=timezone.now(),
        heartbeat_at=timezone.now(), progress_total=4, progress_current=1,
    )  # fmt: skip
    _sign_in(page, live_server, token)
    for path in SCREENS:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert "default-src 'self'" in response.headers["content-security-policy"], path
        assert page.evaluate("typeof htmx === 'object' && typeof htmx.process === 'function'"), path
    assert violations == []


def test_the_bars_are_drawn_to_scale(page, live_server, token, converted):  # noqa: F811
    violations = _violations(page)
    job = JobFactory(
        kind="maintenance_reindex", state=JobState.RUNNING, started_at=timezone.now(),
        heartbeat_at=timezone.now(), progress_total=4, progress_current=1,
    )  # fmt: skip
    _sign_in(page, live_server, token)

    page.goto(f"{live_server.url}/reports/c/tex_to_html")  # 2 no problem, 1 error, 1 todo
    bar = page.locator("#overview-body svg.statusbar").bounding_box()
    error = page.locator("#overview-body svg.statusbar rect.st-error").bounding_box()
    ok = page.locator("#overview-body svg.statusbar rect.st-no_problem").bounding_box()
    assert abs(ok["width"] - bar["width"] / 2) < 3 and abs(error["width"] - bar["width"] / 4) < 3
    assert abs(error["x"] - (ok["x"] + ok["width"])) < 3  # side by side, in order

    page.goto(f"{live_server.url}/jobs")
    row = f"tr[data-job='{job.pk}'] .progress"
    assert page.locator(f"{row} rect").bounding_box()["width"] == pytest.approx(
        page.locator(row).bounding_box()["width"] / 4, abs=2
    )
    # Polling (htmx, under the policy) redraws the bar without a reload.
    Job.objects.filter(pk=job.pk).update(progress_current=3, heartbeat_at=timezone.now())
    page.wait_for_function(
        # A function, not an expression: Playwright would eval() an expression, which the policy forbids.
        f"() => {{ const p = document.querySelector(\"{row}\"); const r = p.querySelector('rect');"
        " return Math.abs(r.getBoundingClientRect().width - 0.75 * p.getBoundingClientRect().width) < 2; }",
        timeout=10000,
    )
    assert violations == []


def test_the_rerun_button_asks_first_and_does_nothing_when_declined(page, live_server, token, converted):  # noqa: F811
    _sign_in(page, live_server, token)
    page.goto(f"{live_server.url}/reports/c/tex_to_html/error")
    before = list(Task.objects.order_by("pk").values_list("status", flat=True))
    questions: list[str] = []

    def decline(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", decline)
    page.locator("#report-rows form.rerun button").first.click()
    page.wait_for_function("() => true")  # let the dialog's handler run
    assert questions and questions[0].startswith("Rerun ") and "back to TODO" in questions[0]
    assert list(Task.objects.order_by("pk").values_list("status", flat=True)) == before

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#report-rows form.rerun button").first.click()
    page.wait_for_selector("ul.messages")
    assert "set to TODO" in page.inner_text("ul.messages")
    assert list(Task.objects.order_by("pk").values_list("status", flat=True)) != before
