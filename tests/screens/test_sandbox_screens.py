"""Carving a sandbox from a report level in real headless Chromium: the form is prefilled with the level's
condition, the carve lands on its job, and the sandbox's page links back to the parent's report level."""

from __future__ import annotations

import pytest

from corpora.models import Document, Task
from dispatcher.ingest import RawResult, result_ingest
from jobs.models import Job
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LOGS = [
    "Error:undefined:\\foo The token \\foo\nStatus:conversion:2\n",
    "Error:undefined:\\bar The token \\bar\nStatus:conversion:2\n",
    "Error:missing_file:x.sty not found\nStatus:conversion:2\n",
    "Status:conversion:0\n",
]


@pytest.fixture
def parent(corpus_root, tmp_path, settings) -> None:
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "c", documents=4)
    activated("c")
    tasks = list(Task.objects.filter(corpus__name="c", service__name="tex_to_html").order_by("document_id"))
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(status=77)
    batch = [RawResult("w", "tex_to_html", str(t.pk), result_zip(log)) for t, log in zip(tasks, LOGS, strict=True)]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip


def test_an_operator_carves_a_sandbox_from_a_category_and_finds_the_way_back(page, live_server, token, parent):
    page.goto(f"{live_server.url}/login?next=/reports/c/tex_to_html/error/undefined")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html/error/undefined")
    assert not page.is_visible("#sandbox form")
    page.click("#sandbox summary")
    form = page.locator("#sandbox form")
    assert form.locator("input[name=category]").get_attribute("value") == "undefined"
    assert form.locator("input[name=severity]").get_attribute("value") == "error"
    assert form.locator("input[name=name]").input_value() == "c-error-undefined"
    form.locator("input[name=name]").fill("undef")
    form.locator("input[name=per_class_limit]").fill("1")
    form.locator("button[type=submit]").click()
    page.wait_for_url(f"{live_server.url}/jobs/**")
    job = Job.objects.get(kind="corpus_sandbox")
    assert str(job.uuid) in page.url
    job_run(job.pk)  # no Celery worker here: the test runs the job the page shows

    page.goto(f"{live_server.url}/corpora/undef")
    assert page.inner_text("#sandbox-origin").startswith("tex_to_html \u203a error \u203a undefined")
    assert set(Document.objects.filter(corpus__name="undef").values_list("name", flat=True)) == {"doc0", "doc1"}
    page.click("#sandbox-origin a")
    page.wait_for_url(f"{live_server.url}/reports/c/tex_to_html/error/undefined")
    assert page.locator("table").first.is_visible()
