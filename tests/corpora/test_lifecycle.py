"""Activate, deactivate and delete: the right rows go, nothing else is touched."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from corpora.models import Activation, Corpus, Document, LogMessage, Run, RuntimeCount, Task, TaskCount
from jobs.runner import job_run
from services.models import Service
from tests.corpora.helpers import activated, imported, make_corpus_dir
from tests.reports.messages import message_tables_problems, messages_add
from tests.support import write_tex

pytestmark = pytest.mark.django_db


def _message(task: Task, what: str = "undefined") -> None:
    messages_add(task, ("error", "x", what, ""))


def test_activation_creates_one_todo_task_per_valid_document_and_opens_a_run(authed, corpus_root):
    directory = make_corpus_dir(corpus_root, "c", documents=3)
    (directory / "broken").mkdir()
    from corpora.actions.corpora import corpus_import

    job_run(corpus_import(name="c", path=str(directory), actor="tester", send=False).pk)
    authed.post("/api/services", {"name": "tex_to_html"}, format="json")
    response = authed.post("/api/corpora/c/services/tex_to_html")
    assert response.status_code == 202 and response.json()["kind"] == "service_activate"
    job_run(response.json()["uuid"])
    tasks = Task.objects.filter(corpus__name="c", service__name="tex_to_html")
    assert tasks.count() == 3 and set(tasks.values_list("status", flat=True)) == {0}
    assert "broken" not in set(tasks.values_list("document__name", flat=True))
    run = Run.objects.get(corpus__name="c", service__name="tex_to_html")
    assert run.owner == "tester" and run.finished_at is None
    detail = authed.get("/api/corpora/c").json()
    assert [s["name"] for s in detail["services"]] == ["import", "tex_to_html"]
    assert detail["services"][1]["counts"]["todo"] == 3


def test_activating_twice_is_409_and_unknown_names_are_404(authed, corpus_root):
    imported(corpus_root, "c")
    activated("c")
    assert authed.post("/api/corpora/c/services/tex_to_html").status_code == 409
    assert authed.post("/api/corpora/nope/services/tex_to_html").status_code == 404
    assert authed.post("/api/corpora/c/services/nope").status_code == 404
    assert authed.post("/api/corpora/c/services/import").status_code == 409


def test_reactivation_after_deactivation_starts_clean_and_keeps_other_pairs(authed, corpus_root):
    imported(corpus_root, "a")
    imported(corpus_root, "b")
    activated("a")
    activated("b")
    kept = Task.objects.filter(corpus__name="b", service__name="tex_to_html")
    kept.update(status=-3)
    _message(kept.first())
    gone = Task.objects.filter(corpus__name="a", service__name="tex_to_html")
    gone.update(status=-2)
    _message(gone.first())
    assert authed.delete("/api/corpora/a/services/tex_to_html").status_code == 400
    assert authed.delete("/api/corpora/a/services/tex_to_html?confirm=wrong").status_code == 400
    assert authed.delete("/api/corpora/a/services/tex_to_html?confirm=tex_to_html").status_code == 204
    assert not Task.objects.filter(corpus__name="a", service__name="tex_to_html").exists()
    assert not LogMessage.objects.filter(corpus__name="a", service__name="tex_to_html").exists()
    assert Task.objects.filter(corpus__name="a", service__name="import").count() == 3
    assert (
        set(kept.values_list("status", flat=True)) == {-3} and LogMessage.objects.filter(corpus__name="b").count() == 1
    )
    assert Run.objects.get(corpus__name="a").finished_at is not None
    assert authed.delete("/api/corpora/a/services/tex_to_html?confirm=tex_to_html").status_code == 404
    activated("a")
    assert set(Task.objects.filter(corpus__name="a", service__name="tex_to_html").values_list("status", flat=True)) == {
        0
    }


def test_deleting_a_corpus_removes_all_of_it_and_nothing_else(authed, corpus_root):
    imported(corpus_root, "doomed")
    imported(corpus_root, "kept")
    activated("doomed")
    activated("kept")
    _message(Task.objects.filter(corpus__name="doomed").first())
    _message(Task.objects.filter(corpus__name="kept").first())
    assert authed.delete("/api/corpora/doomed").status_code == 400
    assert authed.delete("/api/corpora/doomed?confirm=kept").status_code == 400
    assert Corpus.objects.filter(name="doomed").exists()
    assert authed.delete("/api/corpora/doomed?confirm=doomed").status_code == 204
    assert not Corpus.objects.filter(name="doomed").exists()
    kept = Corpus.objects.get(name="kept")
    assert Document.objects.count() == 3 and Task.objects.count() == 6 and LogMessage.objects.count() == 1
    assert set(TaskCount.objects.values_list("corpus_id", flat=True)) == {kept.pk}
    assert authed.delete("/api/corpora/doomed?confirm=doomed").status_code == 404
    assert [c["name"] for c in authed.get("/api/corpora").json()] == ["kept"]


def test_deleting_a_corpus_needs_a_token(api, corpus_root):
    imported(corpus_root, "c")
    assert api.delete("/api/corpora/c?confirm=c").status_code == 401
    assert Corpus.objects.filter(name="c").exists()


def test_corpus_reads_are_public_and_404_for_unknown_names(api, corpus_root):
    imported(corpus_root, "open")
    assert api.get("/api/corpora").status_code == 200
    assert api.get("/api/corpora/open").json()["documents"] == 3
    response = api.get("/api/corpora/closed")
    assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"


def test_the_corpus_list_reports_documents_and_activated_services(api, corpus_root):
    imported(corpus_root, "one", documents=2)
    imported(corpus_root, "two", documents=4)
    activated("two")
    activated("two", service="other")
    rows = {row["name"]: row for row in api.get("/api/corpora").json()}
    assert rows["one"]["documents"] == 2 and rows["one"]["services"] == []
    assert rows["two"]["documents"] == 4 and rows["two"]["services"] == ["other", "tex_to_html"]


def test_counts_stay_exact_through_inserts_updates_and_deletes(corpus_root):
    from django.db import connection

    imported(corpus_root, "c", documents=5)
    activated("c")
    tasks = Task.objects.filter(service__name="tex_to_html")
    ids = list(tasks.values_list("pk", flat=True))
    Task.objects.filter(pk__in=ids[:2]).update(status=7)  # leased
    Task.objects.filter(pk=ids[2]).update(status=-9)  # blocked
    Task.objects.filter(pk=ids[3]).update(status=-4)
    Task.objects.filter(pk=ids[4]).delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT service_id, ccs_status_bucket(status), count(*) FROM corpora_task GROUP BY 1, 2")
        actual = {(s, b): n for s, b, n in cursor.fetchall()}
    kept = {(c.service_id, c.bucket): c.count for c in TaskCount.objects.filter(count__gt=0)}
    assert kept == actual
    service = Service.objects.get(name="tex_to_html")
    assert kept[(service.pk, 1)] == 2 and kept[(service.pk, -6)] == 1 and kept[(service.pk, -4)] == 1


def test_activation_never_wipes_existing_results(corpus_root):
    """A task that already exists for the pair keeps its status when the activation job runs again."""
    from corpora.actions.corpora import service_activate_run

    imported(corpus_root, "c", documents=2)
    activated("c")
    Task.objects.filter(service__name="tex_to_html").update(status=-1)
    write_tex(corpus_root / "c" / "late.tex")
    activation = Activation.objects.get(corpus__name="c")
    result = service_activate_run(activation_id=activation.pk, progress=lambda *a, **k: None, log=lambda line: None)
    assert result.tasks == 0
    assert set(Task.objects.filter(service__name="tex_to_html").values_list("status", flat=True)) == {-1}


def _orphans() -> dict[str, int]:
    """Rows of the high-volume tables (no database-level foreign keys) whose parent is gone."""
    from django.db import connection

    checks = {
        "tasks": "SELECT count(*) FROM corpora_task t WHERE NOT EXISTS (SELECT 1 FROM corpora_document d"
        " WHERE d.id = t.document_id) OR NOT EXISTS (SELECT 1 FROM corpora_corpus c WHERE c.id = t.corpus_id)"
        " OR NOT EXISTS (SELECT 1 FROM services_service s WHERE s.id = t.service_id)",
        "messages": "SELECT count(*) FROM corpora_taskmessages m WHERE NOT EXISTS"
        " (SELECT 1 FROM corpora_task t WHERE t.id = m.task_id)",
        "message classes": "SELECT count(*) FROM corpora_taskclass p WHERE NOT EXISTS"
        " (SELECT 1 FROM corpora_task t WHERE t.id = p.task_id)",
        "tallies": "SELECT count(*) FROM corpora_messagetally m WHERE NOT EXISTS"
        " (SELECT 1 FROM corpora_corpus c WHERE c.id = m.corpus_id)"
        " OR NOT EXISTS (SELECT 1 FROM services_service s WHERE s.id = m.service_id)",
        "runtimes": "SELECT count(*) FROM corpora_taskruntime r WHERE NOT EXISTS"
        " (SELECT 1 FROM corpora_task t WHERE t.id = r.task_id)",
        "grains": "SELECT count(*) FROM corpora_reportgrain g WHERE NOT EXISTS"
        " (SELECT 1 FROM corpora_corpus c WHERE c.id = g.corpus_id)"
        " OR NOT EXISTS (SELECT 1 FROM services_service s WHERE s.id = g.service_id)",
    }
    with connection.cursor() as cursor:
        found = {}
        for name, sql in checks.items():
            cursor.execute(sql)
            found[name] = cursor.fetchone()[0]
    return found


def _runtime_counts() -> dict[tuple[int, int], int]:
    return {(row.service_id, row.runtime_ms): row.count for row in RuntimeCount.objects.exclude(count=0)}


def _runtimes_grouped() -> dict[tuple[int, int], int]:
    from django.db.models import Count

    from corpora.models import TaskRuntime

    rows = TaskRuntime.objects.values("service_id", "runtime_ms").annotate(n=Count("task_id"))
    return {(row["service_id"], row["runtime_ms"]): row["n"] for row in rows}


def test_no_delete_path_leaves_orphans_behind(authed, corpus_root, tmp_path, settings):
    from corpora.models import ReportGrain
    from dispatcher.ingest import RawResult, result_ingest
    from tests.dispatcher.harness import WARNING_LOG, result_zip

    settings.RESULTS_DIR = tmp_path
    for name in ("a", "b", "c"):
        imported(corpus_root, name)
        activated(name)
        activated(name, service="other")
    leased = Task.objects.exclude(service__name="import")
    leased.update(status=9)
    ids = {"tex_to_html": Service.objects.get(name="tex_to_html").pk, "other": Service.objects.get(name="other").pk}
    batch = [
        RawResult("w", t.service.name, str(t.pk), result_zip(WARNING_LOG)) for t in leased.select_related("service")
    ]
    result_ingest(batch, service_ids=ids, results_dir=tmp_path, max_bytes=10**7)
    for name in ("a", "b", "c"):
        authed.get(f"/api/reports/{name}/tex_to_html/error")
    assert ReportGrain.objects.exists() and LogMessage.objects.count() == 18 * 3
    assert _runtime_counts() == _runtimes_grouped() != {}
    authed.delete("/api/corpora/a?confirm=a")
    assert _runtime_counts() == _runtimes_grouped()
    authed.delete("/api/corpora/b/services/tex_to_html?confirm=tex_to_html")
    assert _runtime_counts() == _runtimes_grouped()
    authed.delete("/api/services/other?confirm=other")
    assert _orphans() == {"tasks": 0, "messages": 0, "message classes": 0, "tallies": 0, "runtimes": 0, "grains": 0}
    assert message_tables_problems() == []
    # The runtime report's counts (kept by triggers) still equal the runtimes left, and the deleted
    # service has no count rows at all.
    assert _runtime_counts() == _runtimes_grouped() == {(ids["tex_to_html"], 42): 3}
    assert not RuntimeCount.objects.filter(service_id=ids["other"]).exists()
    assert Task.objects.filter(service__name="tex_to_html").count() == 3  # corpus c only
    assert LogMessage.objects.count() == 3 * 3


def test_holding_leases_keeps_each_running_one_with_its_start_and_leaves_ended_ones_to_the_reaper(corpus_root):
    """While the sink holds results back (a full results disk), no running lease ends; the telemetry's lease
    start (leased_until - lease_seconds) stays where it was."""
    from corpora.task_changes import lease_batch, leases_expire, leases_hold, leases_reap

    imported(corpus_root, "held", documents=3)
    activated("held")
    service = Service.objects.get(name="tex_to_html")
    *_, ended = (task.id for task in lease_batch(service_id=service.pk, limit=3, mark=4242, lease_seconds=5))
    leases_expire([ended])  # its worker went silent
    tasks = Task.objects.filter(corpus__name="held", service=service)
    before = {pk: until - timedelta(seconds=seconds) for pk, until, seconds in tasks.values_list(
        "pk", "leased_until", "lease_seconds")}  # fmt: skip

    assert leases_hold(seconds=60) == 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    for pk, until, seconds in tasks.exclude(pk=ended).values_list("pk", "leased_until", "lease_seconds"):
        assert until >= now + timedelta(seconds=60) and until - timedelta(seconds=seconds) == before[pk], pk
    assert leases_hold(seconds=60) == 0  # each has more than that left
    assert leases_reap(max_attempts=3).returned == 1
    assert list(tasks.filter(status__gt=0).order_by("pk").values_list("pk", flat=True)) == sorted(
        pk for pk in before if pk != ended
    )
