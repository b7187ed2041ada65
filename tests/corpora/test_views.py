"""The corpora screens: twins of /api/corpora, writes through the same actions, journaled."""

from __future__ import annotations

import json

import pytest

from accounts.models import AuditEntry
from corpora.choices import CorpusState
from corpora.models import Activation, Corpus, Document, Task
from jobs.models import Job, JobState
from jobs.runner import job_run
from services.actions import service_register
from tests.corpora.helpers import activated, imported, make_corpus_dir

pytestmark = pytest.mark.django_db


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))


def test_the_corpora_list_screen_renders_the_same_dtos_as_the_api(client, authed, corpus_root):
    imported(corpus_root, "alpha", documents=2)
    activated("alpha")
    imported(corpus_root, "beta", documents=1)
    screen = client.get("/corpora")
    assert screen.status_code == 200
    assert _plain(screen.context["corpora"]) == authed.get("/api/corpora").json()
    assert [row["name"] for row in screen.context["corpora"]] == ["alpha", "beta"]
    assert b'href="/corpora/new"' in screen.content


def test_the_corpus_detail_screen_renders_the_same_dto_as_the_api(client, authed, corpus_root):
    imported(corpus_root, "alpha", documents=3)
    activated("alpha")
    screen = client.get("/corpora/alpha")
    assert screen.status_code == 200
    assert _plain(screen.context["corpus"]) == authed.get("/api/corpora/alpha").json()
    fragment = client.get("/corpora/alpha", {"fragment": "body"})
    assert _plain(fragment.context["corpus"]) == authed.get("/api/corpora/alpha").json()


def test_the_corpus_screens_are_public_to_read_but_show_no_write_controls_to_anonymous_users(client, corpus_root):
    imported(corpus_root, "alpha")
    body = client.get("/corpora/alpha").content.decode()
    assert 'id="activate"' not in body and "Deactivate" not in body and "/corpora/alpha/delete" not in body
    assert "Sign in</a> to activate services" in body


def test_the_status_bar_shows_the_count_of_every_status(screen_client, corpus_root):
    imported(corpus_root, "alpha", documents=4)
    activated("alpha")
    tasks = list(Task.objects.filter(corpus__name="alpha", service__name="tex_to_html").order_by("pk"))
    for task, status in zip(tasks, (-1, -2, -3, 0), strict=True):
        Task.objects.filter(pk=task.pk).update(status=status)
    body = screen_client.get("/corpora/alpha").content.decode()
    row = body[body.index('<tr data-service="tex_to_html">') :]
    row = row[: row.index("</tr>")]
    for key, count in {"no_problem": 1, "warning": 1, "error": 1, "fatal": 0, "todo": 1, "total": 4}.items():
        assert f'data-count="{key}">{count}<' in row, key
    assert 'viewBox="0 0 4 1"' in row  # one unit per task
    assert 'class="seg st-no_problem" x="0" width="1"' in row and 'class="seg st-warning" x="1" width="1"' in row
    assert "st-fatal" in row and 'class="seg st-fatal"' not in row  # in the legend, but no empty segment


def test_the_detail_polls_while_tasks_are_in_progress_and_the_fragment_stops_it_after(client, corpus_root):
    imported(corpus_root, "alpha", documents=2)
    activated("alpha")
    page = client.get("/corpora/alpha").content.decode()
    assert 'hx-get="/corpora/alpha?fragment=body" hx-trigger="every 3s"' in page
    assert client.get("/corpora/alpha", {"fragment": "body"}).status_code == 200

    Task.objects.filter(corpus__name="alpha", service__name="tex_to_html").update(status=-1)
    done = client.get("/corpora/alpha", {"fragment": "body"})
    assert done.status_code == 286 and 'data-count="no_problem">2<' in done.content.decode()
    assert "hx-trigger" not in client.get("/corpora/alpha").content.decode()


def test_a_corpus_still_importing_is_polled(client, corpus_root):
    from corpora.actions.corpora import corpus_import

    corpus_import(name="alpha", path=str(make_corpus_dir(corpus_root, "alpha")), actor="tester", send=False)
    assert "hx-trigger" in client.get("/corpora/alpha").content.decode()
    assert client.get("/corpora/alpha", {"fragment": "body"}).status_code == 200


def test_the_new_corpus_form_imports_a_corpus_and_shows_its_job(screen_client, corpus_root):
    directory = make_corpus_dir(corpus_root, "fresh", documents=2)
    response = screen_client.post("/corpora/new", {"name": "fresh", "path": str(directory), "description": "two"})
    job = Job.objects.get(kind="corpus_import")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}"
    corpus = Corpus.objects.get(name="fresh")
    assert corpus.state == CorpusState.IMPORTING and corpus.description == "two"
    assert job.state == JobState.QUEUED and job.actor == "tester" and job.params["corpus_id"] == corpus.pk
    entry = AuditEntry.objects.get(action="corpus.import", target="fresh")
    assert entry.actor == "tester" and entry.outcome == "ok" and entry.params["path"] == str(directory)
    assert "csrfmiddlewaretoken" not in entry.params


def test_the_new_corpus_form_answers_with_the_apis_errors_and_status(screen_client, authed, corpus_root):
    directory = make_corpus_dir(corpus_root, "fresh")
    bad_name = screen_client.post("/corpora/new", {"name": "no spaces", "path": str(directory)})
    api_twin = authed.post("/api/corpora", {"name": "no spaces", "path": str(directory)}, format="json")
    assert bad_name.status_code == 400 == api_twin.status_code
    assert "Not a valid name" in bad_name.content.decode()
    assert bad_name.context["form"]["name"] == "no spaces"  # the operator's input is kept

    outside = screen_client.post("/corpora/new", {"name": "fresh", "path": "/etc"})
    assert outside.status_code == 422 and "lies outside the corpus roots" in outside.content.decode()
    assert outside.context["errors"] == {"path": ["outside the corpus roots"]}

    root = screen_client.post("/corpora/new", {"name": "fresh", "path": "."})
    root_twin = authed.post("/api/corpora", {"name": "fresh", "path": "."}, format="json")
    assert root.status_code == 422 == root_twin.status_code and "is a corpus root itself" in root.content.decode()
    assert root.context["errors"] == root_twin.json()["errors"] == {"path": ["a corpus root itself"]}

    imported(corpus_root, "taken", documents=1)
    AuditEntry.objects.filter(target="taken").delete()  # the set-up's own import is journaled too
    taken = screen_client.post("/corpora/new", {"name": "taken", "path": str(directory)})
    assert taken.status_code == 409 and "exists already" in taken.content.decode()

    assert set(Corpus.objects.values_list("name", flat=True)) == {"taken"}
    journal = AuditEntry.objects.filter(action="corpus.import", actor="tester")
    assert set(journal.values_list("status_code", flat=True)) == {400, 422, 409}


def test_activating_a_service_from_the_corpus_screen_starts_a_journaled_job(screen_client, corpus_root):
    imported(corpus_root, "alpha", documents=3)
    service_register(name="tex_to_html", actor="tester")
    assert screen_client.get("/corpora/alpha").context["activatable"] == ["tex_to_html"]
    response = screen_client.post("/corpora/alpha/activate", {"service": "tex_to_html"})
    job = Job.objects.get(kind="service_activate")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}"
    assert Activation.objects.filter(corpus__name="alpha", service__name="tex_to_html", actor="tester").exists()
    job_run(job.pk)
    assert Task.objects.filter(corpus__name="alpha", service__name="tex_to_html", status=0).count() == 3
    entry = AuditEntry.objects.get(action="service.activation", target="alpha/tex_to_html")
    assert entry.actor == "tester" and entry.outcome == "ok"
    assert screen_client.get("/corpora/alpha").context["activatable"] == []


def test_activating_a_protected_or_an_active_service_is_refused_on_the_page(screen_client, corpus_root):
    imported(corpus_root, "alpha")
    activated("alpha")
    again = screen_client.post("/corpora/alpha/activate", {"service": "tex_to_html"})
    assert again.status_code == 409 and "already active" in again.content.decode()
    protected = screen_client.post("/corpora/alpha/activate", {"service": "import"})
    assert protected.status_code == 409 and "infrastructure service" in protected.content.decode()
    unknown = screen_client.post("/corpora/alpha/activate", {"service": "nope"})
    assert unknown.status_code == 404
    assert Job.objects.filter(kind="service_activate").count() == 1  # only the fixture's own activation


def test_extend_starts_a_job_and_is_refused_while_the_corpus_imports(screen_client, corpus_root):
    from corpora.actions.corpora import corpus_import

    imported(corpus_root, "alpha")
    response = screen_client.post("/corpora/alpha/extend")
    job = Job.objects.get(kind="corpus_extend")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}"
    assert AuditEntry.objects.filter(action="corpus.extend", target="alpha", actor="tester", outcome="ok").exists()

    corpus_import(name="busy", path=str(make_corpus_dir(corpus_root, "busy")), actor="tester", send=False)
    refused = screen_client.post("/corpora/busy/extend")
    assert refused.status_code == 409 and "still importing" in refused.content.decode()
    assert Job.objects.filter(kind="corpus_extend").count() == 1


def test_deleting_a_corpus_needs_its_name_typed(screen_client, corpus_root):
    imported(corpus_root, "alpha", documents=2)
    imported(corpus_root, "keep", documents=1)
    page = screen_client.get("/corpora/alpha/delete")
    assert page.status_code == 200 and "Type <code>alpha</code> to confirm" in page.content.decode()

    wrong = screen_client.post("/corpora/alpha/delete", {"confirm": "alph"})
    assert wrong.status_code == 400 and "confirm=alpha" in wrong.content.decode()
    empty = screen_client.post("/corpora/alpha/delete", {"confirm": ""})
    assert empty.status_code == 400
    assert Document.objects.filter(corpus__name="alpha").count() == 2
    assert AuditEntry.objects.filter(action="corpus.delete", target="alpha", status_code=400).count() == 2

    right = screen_client.post("/corpora/alpha/delete", {"confirm": "alpha"}, follow=True)
    assert right.redirect_chain == [("/corpora", 302)]
    assert "The corpus alpha was deleted" in right.content.decode()
    assert not Corpus.objects.filter(name="alpha").exists()
    assert Document.objects.filter(corpus__name="keep").count() == 1
    assert AuditEntry.objects.filter(action="corpus.delete", target="alpha", actor="tester", outcome="ok").exists()


def test_deactivating_a_service_needs_its_name_typed(screen_client, corpus_root):
    imported(corpus_root, "alpha", documents=2)
    activated("alpha")
    link = 'href="/corpora/alpha/services/tex_to_html/deactivate"'
    assert link in screen_client.get("/corpora/alpha").content.decode()
    page = screen_client.get("/corpora/alpha/services/tex_to_html/deactivate")
    assert page.status_code == 200 and "Type <code>tex_to_html</code> to confirm" in page.content.decode()

    wrong = screen_client.post("/corpora/alpha/services/tex_to_html/deactivate", {"confirm": "alpha"})
    assert wrong.status_code == 400
    assert Task.objects.filter(corpus__name="alpha", service__name="tex_to_html").count() == 2

    right = screen_client.post("/corpora/alpha/services/tex_to_html/deactivate", {"confirm": "tex_to_html"})
    assert right.status_code == 302 and right["Location"] == "/corpora/alpha"
    assert not Task.objects.filter(corpus__name="alpha", service__name="tex_to_html").exists()
    assert not Activation.objects.filter(corpus__name="alpha").exists()
    assert Task.objects.filter(corpus__name="alpha", service__name="import").count() == 2
    outcomes = AuditEntry.objects.filter(action="service.deactivation", target="alpha/tex_to_html", actor="tester")
    assert sorted(outcomes.values_list("outcome", flat=True)) == ["400 Bad request", "ok"]


def test_unknown_corpora_and_services_answer_404_on_the_screens(screen_client, corpus_root):
    imported(corpus_root, "alpha")
    service_register(name="tex_to_html", actor="tester")
    for url in (
        "/corpora/nope",
        "/corpora/nope/delete",
        "/corpora/alpha/services/nope/deactivate",
        "/corpora/alpha/services/tex_to_html/deactivate",  # registered, but not active here
    ):
        response = screen_client.get(url)
        assert response.status_code == 404, url
        assert response.templates[0].name == "error.html"
    assert screen_client.post("/corpora/nope/delete", {"confirm": "nope"}).status_code == 404
    assert screen_client.post("/corpora/nope/extend").status_code == 404


def test_corpus_writes_send_anonymous_users_to_login(client, corpus_root):
    imported(corpus_root, "alpha")
    activated("alpha")
    for method, url, data in (
        ("get", "/corpora/new", {}),
        ("post", "/corpora/new", {"name": "x", "path": str(corpus_root / "alpha")}),
        ("post", "/corpora/alpha/extend", {}),
        ("post", "/corpora/alpha/activate", {"service": "tex_to_html"}),
        ("get", "/corpora/alpha/delete", {}),
        ("post", "/corpora/alpha/delete", {"confirm": "alpha"}),
        ("post", "/corpora/alpha/services/tex_to_html/deactivate", {"confirm": "tex_to_html"}),
    ):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and response["Location"].startswith("/login"), url
    assert list(Corpus.objects.values_list("name", flat=True)) == ["alpha"]
    assert Activation.objects.filter(corpus__name="alpha").exists()
    assert not Job.objects.filter(kind="corpus_extend").exists()


def test_the_home_page_links_the_corpora_list(client):
    response = client.get("/")
    assert response.status_code == 200 and 'href="/corpora"' in response.content.decode()
