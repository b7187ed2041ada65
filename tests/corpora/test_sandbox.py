"""Sandbox corpora through the API: the carve takes exactly the matching documents, samples every class
deterministically, refuses impossible requests before any job, and the sandbox lives as a corpus of its
own that references its parent's entries (results come through the real ingestion; no conversion here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import AuditEntry
from corpora.models import Corpus, Document, LogMessage, Task
from dispatcher.ingest import RawResult, result_ingest
from jobs.models import Job
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
UNDEFINED_FOO = "Error:undefined:\\foo The token \\foo\n"
# doc0..doc4: undefined \foo; doc5, doc6: undefined \bar (doc6 also \foo); doc7: a missing file;
# doc8: a warning only; doc9: fatal; doc10: clean; doc11 stays TODO. doc0 and doc10 loaded a file (info).
LOADED = "(Loading /x/article.cls.ltxml...\n"
LOGS = [
    LOADED + UNDEFINED_FOO + "Status:conversion:2\n",
    UNDEFINED_FOO + UNDEFINED_FOO + "Status:conversion:2\n",
    UNDEFINED_FOO + "Warning:expected:label Missing\nStatus:conversion:2\n",
    UNDEFINED_FOO + "Status:conversion:2\n",
    UNDEFINED_FOO + "Status:conversion:2\n",
    "Error:undefined:\\bar once\nStatus:conversion:2\n",
    "Error:undefined:\\bar once\n" + UNDEFINED_FOO + "Status:conversion:2\n",
    "Error:missing_file:x.sty not found\nStatus:conversion:2\n",
    "Warning:expected:label Missing\nStatus:conversion:1\n",
    "Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\n",
    LOADED + "Status:conversion:0\n",
]


@pytest.fixture
def parent(corpus_root: Path, tmp_path: Path, settings) -> list[Task]:
    """Corpus p of 12 documents with tex_to_html results ingested as the dispatcher applies them."""
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "p", documents=12)
    activated("p")
    tasks = list(Task.objects.filter(corpus__name="p", service__name="tex_to_html").order_by("document__name"))
    tasks.sort(key=lambda t: int(Document.objects.get(pk=t.document_id).name[3:]))
    done = tasks[: len(LOGS)]
    Task.objects.filter(pk__in=[t.pk for t in done]).update(status=77)
    batch = [RawResult("w", "tex_to_html", str(t.pk), result_zip(log)) for t, log in zip(done, LOGS, strict=True)]
    result_ingest(batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    return tasks


def _carve(api: Any, body: dict[str, Any], parent_name: str = "p") -> Job:
    response = api.post(f"/api/corpora/{parent_name}/sandbox", body, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["kind"] == "corpus_sandbox" and response.json()["state"] == "queued"
    job_run(response.json()["uuid"])
    job = Job.objects.get(pk=response.json()["uuid"])
    assert job.state == "succeeded", job.message
    return job


def _documents(name: str) -> set[str]:
    return set(Document.objects.filter(corpus__name=name).values_list("name", flat=True))


def _problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["detail"]
    if field is not None:
        assert field in body["errors"], body
    return body


def _snapshot(corpus: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    tasks = list(Task.objects.filter(corpus__name=corpus).order_by("pk").values_list("pk", "service_id", "status"))
    messages = list(
        LogMessage.objects.filter(corpus__name=corpus).order_by("pk").values_list("pk", "task_id", "category", "what")
    )
    return tasks, messages


def test_a_sandbox_carved_by_category_holds_exactly_the_matching_documents(authed, parent):
    before = _snapshot("p")
    job = _carve(authed, {"name": "undef", "service": "tex_to_html", "severity": "error", "category": "undefined"})
    assert (job.progress_current, job.progress_total) == (2, 2) and job.result["documents"] == 7
    assert _documents("undef") == {f"doc{i}" for i in range(7)}
    sandbox = Corpus.objects.get(name="undef")
    source = Corpus.objects.get(name="p")
    assert sandbox.parent_id == source.pk and sandbox.path == source.path and sandbox.state == "ready"
    mine = {d.name: (d.entry, d.kind, d.main_file) for d in Document.objects.filter(corpus=sandbox)}
    theirs = {d.name: (d.entry, d.kind, d.main_file) for d in Document.objects.filter(corpus=source, name__in=mine)}
    assert mine == theirs
    imports = Task.objects.filter(corpus=sandbox, service__name="import")
    assert imports.count() == 7 and set(imports.values_list("status", flat=True)) == {-1}
    assert not Task.objects.filter(corpus=sandbox).exclude(service__name="import").exists()
    assert _snapshot("p") == before

    detail = authed.get("/api/corpora/undef").json()
    assert detail["parent"] == "p" and detail["documents"] == 7 and detail["state"] == "ready"
    assert detail["condition"] == {"service": "tex_to_html", "severity": "error", "category": "undefined", "seed": 0}
    assert authed.get("/api/corpora/p").json()["condition"] is None
    listed = {c["name"]: c["parent"] for c in authed.get("/api/corpora").json()}
    assert listed == {"p": None, "undef": "p"}
    assert AuditEntry.objects.filter(action="corpus.sandbox", target="p/undef").exists()


def test_what_status_entry_and_limit_narrow_the_carve(authed, parent):
    _carve(authed, {"name": "bar", "service": "tex_to_html", "severity": "error", "category": "undefined",
                    "what": "\\bar"})  # fmt: skip
    assert _documents("bar") == {"doc5", "doc6"}
    _carve(authed, {"name": "warned", "service": "tex_to_html", "severity": "warning", "status": "error"})
    assert _documents("warned") == {"doc2"}  # an error task with a warning message
    _carve(authed, {"name": "st", "service": "tex_to_html", "status": "fatal"})
    assert _documents("st") == {"doc9"}
    _carve(authed, {"name": "ent", "service": "tex_to_html", "entry_contains": "doc1"})
    assert _documents("ent") == {"doc1", "doc10", "doc11"}  # any task of the service, the TODO one too
    _carve(authed, {"name": "entsev", "service": "tex_to_html", "severity": "error", "entry_contains": "doc1"})
    assert _documents("entsev") == {"doc1"}
    _carve(authed, {"name": "info", "service": "tex_to_html", "severity": "info"})
    assert _documents("info") == {"doc0", "doc10"}  # info spans every completed status
    _carve(authed, {"name": "info1", "service": "tex_to_html", "severity": "info", "per_class_limit": 1})
    assert len(_documents("info1")) == 1 and _documents("info1") <= {"doc0", "doc10"}  # one class
    _carve(authed, {"name": "lim", "service": "tex_to_html", "severity": "error", "limit": 3, "seed": 7})
    _carve(authed, {"name": "lim2", "service": "tex_to_html", "severity": "error", "limit": 3, "seed": 7})
    assert len(_documents("lim")) == 3 and _documents("lim") == _documents("lim2")
    assert _documents("lim") <= {f"doc{i}" for i in range(8)}


def _first_by_hash(members: set[str], seed: int, n: int) -> set[str]:
    """The n members a seed's order puts first: hashint8extended(task id, seed) of their tex_to_html task."""
    tasks = Task.objects.filter(corpus__name="p", service__name="tex_to_html", document__name__in=members)
    ids = dict(tasks.values_list("document__name", "pk"))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t FROM unnest(%s::bigint[]) AS t ORDER BY hashint8extended(t, %s), t LIMIT %s",
            [list(ids.values()), seed, n],
        )
        chosen = {task_id for (task_id,) in cursor.fetchall()}
    return {name for name, task_id in ids.items() if task_id in chosen}


def test_per_class_limit_takes_at_most_n_of_every_class_and_the_same_request_the_same_sample(authed, parent):
    classes = {
        ("undefined", "\\foo"): {f"doc{i}" for i in (0, 1, 2, 3, 4, 6)},
        ("undefined", "\\bar"): {"doc5", "doc6"},
        ("missing_file", "x.sty"): {"doc7"},
    }
    samples = []
    for seed in range(8):
        body = {"service": "tex_to_html", "severity": "error", "per_class_limit": 2, "seed": seed}
        _carve(authed, {"name": f"s{seed}", **body})
        _carve(authed, {"name": f"again{seed}", **body})
        taken = _documents(f"s{seed}")
        assert taken == _documents(f"again{seed}")
        # Each class gives its first 2 in the seed's order (doc6, in two classes, may stand for both).
        assert taken == set().union(*(_first_by_hash(members, seed, 2) for members in classes.values()))
        for members in classes.values():
            assert taken & members
        samples.append(frozenset(taken))
    assert len(set(samples)) > 1  # the seed chooses the sample
    _carve(authed, {"name": "one", "service": "tex_to_html", "severity": "error", "category": "undefined",
                    "per_class_limit": 1, "limit": 1})  # fmt: skip
    assert len(_documents("one")) == 1


def test_invalid_requests_give_their_problems_and_start_no_job(authed, parent, corpus_root):
    good = {"name": "sb", "service": "tex_to_html", "severity": "error"}
    imported(corpus_root, "other", documents=1)
    jobs = Job.objects.count()
    _problem(APIClient().post("/api/corpora/p/sandbox", good, format="json"), 401)
    _problem(authed.post("/api/corpora/nope/sandbox", good, format="json"), 404)
    _problem(authed.post("/api/corpora/p/sandbox", {**good, "service": "nope"}, format="json"), 404)
    _problem(authed.post("/api/corpora/other/sandbox", good, format="json"), 404)  # not active there
    _problem(authed.post("/api/corpora/p/sandbox", {**good, "name": "other"}, format="json"), 409)
    bad = [
        ({"name": "sb", "service": "tex_to_html", "category": "undefined"}, "category"),
        ({**good, "what": "\\foo"}, "what"),
        ({**good, "severity": "dreadful"}, "severity"),
        ({**good, "status": "dreadful"}, "status"),
        ({"name": "sb", "service": "tex_to_html", "per_class_limit": 2}, "per_class_limit"),
        ({**good, "limit": "5"}, "limit"),
        ({**good, "limit": 0}, "limit"),
        ({**good, "seed": 1.5}, "seed"),
        ({**good, "name": "a/b"}, "name"),
        ({"service": "tex_to_html"}, "name"),
    ]
    for body, field in bad:
        _problem(authed.post("/api/corpora/p/sandbox", body, format="json"), 400, field)
    assert Job.objects.count() == jobs and not Corpus.objects.filter(name="sb").exists()


def test_the_parent_cannot_be_deleted_while_a_sandbox_exists_and_a_sandbox_cannot_be_extended(authed, parent):
    _carve(authed, {"name": "sb1", "service": "tex_to_html", "severity": "fatal"})
    _carve(authed, {"name": "sb2", "service": "tex_to_html", "severity": "warning"})
    body = _problem(authed.delete("/api/corpora/p?confirm=p"), 409, "sandboxes")
    assert body["errors"]["sandboxes"] == ["sb1", "sb2"] and "sb1, sb2" in body["detail"]
    assert Corpus.objects.filter(name="p").exists() and Task.objects.filter(corpus__name="p").count() == 24
    _problem(authed.post("/api/corpora/sb1/extend"), 409)
    assert authed.delete("/api/corpora/sb1?confirm=sb1").status_code == 204
    assert authed.delete("/api/corpora/sb2?confirm=sb2").status_code == 204
    assert _documents("p") == {f"doc{i}" for i in range(12)} and Task.objects.filter(corpus__name="p").count() == 24
    assert authed.delete("/api/corpora/p?confirm=p").status_code == 204


def test_a_failed_carve_removes_the_half_made_sandbox(authed, parent):
    response = authed.post("/api/corpora/p/sandbox", {"name": "gone", "service": "tex_to_html"}, format="json")
    Corpus.objects.filter(name="gone").update(condition={"service": "vanished", "seed": 0})
    job_run(response.json()["uuid"])
    assert Job.objects.get(pk=response.json()["uuid"]).state == "failed"
    assert not Corpus.objects.filter(name="gone").exists() and _documents("gone") == set()


def test_a_sandbox_is_activated_and_reported_on_its_own(authed, parent):
    _carve(authed, {"name": "sb", "service": "tex_to_html", "severity": "error", "category": "undefined"})
    before = _snapshot("p")
    response = authed.post("/api/corpora/sb/services/tex_to_html")
    assert response.status_code == 202
    job_run(response.json()["uuid"])
    mine = Task.objects.filter(corpus__name="sb", service__name="tex_to_html")
    assert mine.count() == 7 and set(mine.values_list("status", flat=True)) == {0}
    assert set(mine.values_list("document__corpus__name", flat=True)) == {"sb"}
    overview = authed.get("/api/reports/sb/tex_to_html").json()
    assert overview["counts"]["todo"] == 7 and overview["total"] == 7
    assert _snapshot("p") == before
    assert authed.get("/api/runs/sb/tex_to_html/current").json()["tallies"]["todo"] == 7
    snapshot = authed.post("/api/corpora/sb/services/tex_to_html/snapshot")
    assert snapshot.status_code == 202 and snapshot.json()["rows"] == 7
    assert _snapshot("p") == before


# --- screens -------------------------------------------------------------------------------------


def _form_fields(body: str) -> dict[str, str]:
    form = body[body.index('id="sandbox"') :]
    form = form[: form.index("</form>")]
    return dict(re.findall(r'<input type="(?:hidden|text|number)" name="(\w+)"(?: value="([^"]*)")?', form))


def test_every_report_level_offers_the_sandbox_form_prefilled_with_its_condition(screen_client, client, parent):
    levels = {
        "/reports/p/tex_to_html/error": {"service": "tex_to_html", "severity": "error", "name": "p-error"},
        "/reports/p/tex_to_html/error/undefined": {"category": "undefined", "name": "p-error-undefined"},
        "/reports/p/tex_to_html/error/undefined/%5Cbar": {"category": "undefined", "what": "\\bar"},
    }
    for url, expected in levels.items():
        page = screen_client.get(url)
        assert page.status_code == 200, url
        fields = _form_fields(page.content.decode())
        assert {key: fields.get(key) for key in expected} == expected, (url, fields)
        assert 'action="/corpora/p/sandbox"' in page.content.decode()
    client.logout()
    assert 'id="sandbox"' not in client.get("/reports/p/tex_to_html/error").content.decode()


def test_the_sandbox_form_carves_is_journaled_and_the_sandbox_page_links_back(screen_client, parent):
    form = {"service": "tex_to_html", "severity": "error", "category": "undefined", "what": "\\bar",
            "name": "from-screen", "per_class_limit": "", "limit": "", "entry_contains": "", "seed": "3"}  # fmt: skip
    response = screen_client.post("/corpora/p/sandbox", form)
    assert response.status_code == 302 and response["Location"].startswith("/jobs/")
    job = Job.objects.get(kind="corpus_sandbox")
    assert job.actor == "tester"
    job_run(job.pk)
    assert _documents("from-screen") == {"doc5", "doc6"}
    entry = AuditEntry.objects.get(action="corpus.sandbox")
    assert entry.target == "p/from-screen" and entry.params["what"] == "\\bar"
    page = screen_client.get("/corpora/from-screen").content.decode()
    assert 'href="/corpora/p"' in page and 'href="/reports/p/tex_to_html/error/undefined/%5Cbar"' in page
    assert 'id="extend"' not in page
    refused = screen_client.post("/corpora/p/sandbox", {**form, "name": "x", "what": "\\bar", "category": ""})
    assert refused.status_code == 400 and "category" in refused.content.decode()
    assert screen_client.post("/corpora/p/sandbox", {**form, "name": "from-screen"}).status_code == 409
    assert Job.objects.filter(kind="corpus_sandbox").count() == 1
    deletion = screen_client.post("/corpora/p/delete", {"confirm": "p"})
    assert deletion.status_code == 409 and "from-screen" in deletion.content.decode()
    assert Corpus.objects.filter(name="p").exists()


def test_per_class_samples_of_large_classes_equal_a_rank_over_every_row(authed, corpus_root):
    """Classes of more than 4 * limit + 64 tasks keep only the rows under a hash bound before ranking; the
    sample must still be the first `limit` of each class by (hash, task), as a rank over every row gives,
    for classes whose bound leaves fewer than `limit` rows too (the entry filter drops most of a class)."""
    from corpora.message_store import messages_write

    imported(corpus_root, "big", documents=300)
    activated("big")
    tasks = list(Task.objects.filter(corpus__name="big", service__name="tex_to_html").order_by("pk"))
    names = dict(Document.objects.filter(corpus__name="big").values_list("pk", "name"))
    statuses = (-1, -2, -3)  # info spans them
    members = {  # class (severity, category, what) -> task indexes
        ("info", "load", "everyone"): range(300),
        ("info", "load", "half"): range(0, 300, 2),
        ("warning", "expected", "few"): range(1, 300, 60),
        ("warning", "expected", "most"): [i for i in range(300) if i % 3 == 1 and i % 9],
        ("error", "undefined", "\\x"): [i for i in range(300) if i % 3 == 2],
    }
    with connection.cursor() as cursor:
        for index, task in enumerate(tasks):
            status = statuses[index % 3]
            Task.objects.filter(pk=task.pk).update(status=status)
            log = [(*key, "") for key, indexes in members.items() if index in indexes]
            messages_write(cursor, [(task.pk, task.corpus_id, task.service_id, status, log)])

    own_status = {"warning": -2, "error": -3}

    def expected(severity: str, limit: int, seed: int, entry: str = "") -> set[str]:
        taken = set()
        for (class_severity, _, _), indexes in members.items():
            if class_severity != severity:
                continue
            ids = [
                tasks[i].pk
                for i in indexes
                if entry in names[tasks[i].document_id]
                and (severity == "info" or statuses[i % 3] == own_status[severity])
            ]
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT t FROM unnest(%s::bigint[]) AS t ORDER BY hashint8extended(t, %s), t LIMIT %s",
                    [ids, seed, limit],
                )
                taken |= {row[0] for row in cursor.fetchall()}
        return {names[task.document_id] for task in tasks if task.pk in taken}

    cases = [
        ("info", 1, 0, ""),
        ("info", 3, 5, ""),
        ("info", 40, 9, ""),
        ("error", 2, 3, ""),
        ("info", 2, 1, "doc1"),
        ("info", 10, 2, "doc7"),
        ("warning", 2, 4, ""),
    ]
    for number, (severity, limit, seed, entry) in enumerate(cases):
        body = {"service": "tex_to_html", "severity": severity, "per_class_limit": limit, "seed": seed}
        _carve(authed, {"name": f"big{number}", **body, **({"entry_contains": entry} if entry else {})}, "big")
        want = expected(severity, limit, seed, entry)
        assert _documents(f"big{number}") == want and want, (severity, limit, seed, entry)
