"""Profile experiments through their action, job, query and API: the pair's papers that are not error-free
carved into a sandbox, a service per variant activated on it, and the variants ranked by papers fixed, then
broken. Statuses are set as ingestion would leave them (no conversion here; tests/corpora/
test_experiments_end_to_end.py converts for real)."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry
from conversion.choices import TaskStatus
from conversion.profiles import profile_load
from corpora.experiments.actions import experiment_start
from corpora.experiments.queries import experiment_detail, experiment_records
from corpora.experiments.serializers import ExperimentPaperSerializer
from corpora.models import Document, Experiment, ExperimentVariant, Task
from jobs.models import Job
from jobs.runner import job_run
from services.models import Service
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import finish

pytestmark = pytest.mark.django_db(transaction=True)

S = TaskStatus
# doc0..doc4 of corpus a under tex_to_html: two errors and a fatal to fix.
PARENT = [S.NO_PROBLEM, S.ERROR, S.FATAL, S.ERROR, S.WARNING]
VARIANTS = [
    {"name": "styles", "changes": {"includestyles": True}},
    {"name": "long", "changes": {"timeout_seconds": 600, "preloads": ["[nobibtex]latexml.sty"]}},
    {"name": "control", "changes": {}},
]


@pytest.fixture
def pair(corpus_root) -> None:
    imported(corpus_root, "a", documents=5)
    activated("a")
    finish(PARENT)


def _started(name: str = "exp", variants: list | None = None) -> Job:
    job = experiment_start(
        corpus="a", service="tex_to_html", name=name, variants=variants or VARIANTS, actor="tester", send=False
    )
    job_run(job.pk)
    job.refresh_from_db()
    return job


def test_an_experiment_carves_the_papers_not_error_free_and_activates_a_service_per_variant(pair):
    job = _started()
    assert job.state == "succeeded", job.log
    assert job.result == {"documents": 3, "variants": 3, "tasks": 9}
    assert set(Document.objects.filter(corpus__name="exp").values_list("name", flat=True)) == {"doc1", "doc2", "doc3"}
    parent = profile_load(Service.objects.get(name="tex_to_html").profile)
    styles = profile_load(Service.objects.get(name="exp.styles").profile)
    long = profile_load(Service.objects.get(name="exp.long").profile)
    assert styles.includestyles and styles.as_json() == {**parent.as_json(), "includestyles": True}
    assert long.timeout_seconds == 600 and long.preloads == ("[nobibtex]latexml.sty",)
    assert Service.objects.get(name="exp.control").profile == parent.as_json()
    for service in ("exp.styles", "exp.long", "exp.control"):
        statuses = Task.objects.filter(corpus__name="exp", service__name=service).values_list("status", flat=True)
        assert list(statuses) == [S.TODO] * 3
    entry = AuditEntry.objects.get(action="experiment.start")
    assert (entry.target, entry.outcome, entry.actor) == ("a/tex_to_html/exp", "ok", "tester")


def test_variants_rank_by_papers_fixed_then_by_papers_broken_with_the_papers_behind_each_number(pair):
    _started()
    detail = experiment_detail("exp")
    assert [(v.name, v.done, v.total, v.fixed, v.broken) for v in detail.variants] == [
        ("control", 0, 3, 0, 0), ("long", 0, 3, 0, 0), ("styles", 0, 3, 0, 0),
    ]  # fmt: skip
    # doc1 error, doc2 fatal, doc3 error for the pair.
    finish([S.NO_PROBLEM, S.WARNING, S.FATAL], "exp.styles", "exp")  # fixes doc1 and doc2, breaks doc3
    finish([S.NO_PROBLEM, S.ERROR, S.WARNING], "exp.long", "exp")  # fixes doc1 and doc3; doc2 better, still error
    finish([S.ERROR, S.FATAL, S.ERROR], "exp.control", "exp")
    detail = experiment_detail("exp")
    ranked = [(v.rank, v.name, v.done, v.total, v.fixed, v.broken) for v in detail.variants]
    assert ranked == [(1, "long", 3, 3, 2, 0), (2, "styles", 3, 3, 2, 1), (3, "control", 3, 3, 0, 0)]
    styles = detail.variants[1]
    assert [p.name for p in styles.fixed_papers] == ["doc1", "doc2"]
    assert [p.name for p in styles.broken_papers] == ["doc3"]
    # The query names the paper's sandbox and service; its serializer links the document report there.
    assert (styles.broken_papers[0].sandbox, styles.broken_papers[0].service) == ("exp", "exp.styles")
    assert (
        ExperimentPaperSerializer(styles.broken_papers[0]).data["report"] == "/api/corpus/exp/exp.styles/document/doc3"
    )
    assert detail.papers == 3 and detail.experiment.state == "succeeded"
    assert experiment_detail("exp", papers_shown=1).variants[1].fixed_papers[0].name == "doc1"


def test_a_refused_experiment_leaves_nothing_behind(pair, corpus_root):
    def refusal(**given) -> tuple[str, dict]:
        arguments = {"corpus": "a", "service": "tex_to_html", "name": "exp", "variants": VARIANTS, **given}
        with pytest.raises(Exception) as caught:
            experiment_start(actor="tester", send=False, **arguments)
        return type(caught.value).__name__, caught.value.errors or {}

    kind, errors = refusal(variants=[{"name": "x", "changes": {"nosuchoption": True}}])
    assert kind == "BadRequest" and "nosuchoption" in errors["variants"]["x"]
    kind, errors = refusal(variants=[{"name": "x", "changes": {"preset": "arxiv"}}])
    assert kind == "BadRequest" and "preset" in errors["variants"]["x"]
    assert refusal(variants=[{"name": "x"}, {"name": "x"}])[0] == "BadRequest"
    assert refusal(variants=[])[0] == "BadRequest"
    assert refusal(service="nosuch")[0] == "NotFound"
    assert refusal(name="a")[0] == "Conflict"  # the sandbox would take the corpus's name
    imported(corpus_root, "clean", documents=1)
    activated("clean")
    finish([S.NO_PROBLEM], corpus="clean")
    assert refusal(corpus="clean")[0] == "Conflict"  # nothing to fix
    assert not Experiment.objects.exists() and not Service.objects.filter(name__startswith="exp.").exists()
    assert set(AuditEntry.objects.filter(action="experiment.start").values_list("outcome", flat=True)) == {
        "400 Bad request", "404 Not found", "409 Conflict",
    }  # fmt: skip


def test_an_experiment_stays_in_the_history_when_its_sandbox_and_a_variant_s_service_are_deleted(authed, pair):
    _started()
    assert authed.delete("/api/services/exp.long?confirm=exp.long").status_code == 204
    assert authed.delete("/api/corpora/exp?confirm=exp").status_code == 204
    experiment = Experiment.objects.get(name="exp")
    assert experiment.sandbox_id is None and experiment.corpus_name == "a"
    assert ExperimentVariant.objects.get(name="long").service_id is None
    answer = authed.get("/api/experiments/exp").json()
    assert answer["experiment"]["sandbox"] is None and answer["papers"] == 0
    assert {v["name"]: v["total"] for v in answer["variants"]} == {"styles": 0, "long": 0, "control": 0}
    assert [record.name for record in experiment_records()] == ["exp"]


def test_the_api_starts_lists_and_shows_an_experiment(authed, pair):
    body = {"corpus": "a", "service": "tex_to_html", "name": "viaapi", "variants": VARIANTS[:2]}
    answer = authed.post("/api/experiments", body, format="json")
    assert answer.status_code == 202 and answer.json()["kind"] == "experiment_run"
    job_run(Job.objects.get(uuid=answer.json()["uuid"]).pk)
    listed = authed.get("/api/experiments").json()
    assert [(e["name"], e["corpus"], e["service"], e["variants"], e["state"]) for e in listed] == [
        ("viaapi", "a", "tex_to_html", ["styles", "long"], "succeeded")
    ]
    shown = authed.get(listed[0]["url"]).json()
    assert [v["total"] for v in shown["variants"]] == [3, 3]
    assert shown["variants"][0]["changes"] in ({"includestyles": True}, VARIANTS[1]["changes"])
    assert shown["profile"] == Service.objects.get(name="tex_to_html").profile
    refused = authed.post("/api/experiments", {**body, "name": "again", "variants": "[]"}, format="json")
    assert refused.status_code == 400 and "variants" in refused.json()["errors"]
    assert authed.get("/api/experiments/nosuch").status_code == 404
    assert AuditEntry.objects.filter(action="experiment.start", outcome="ok").count() == 1
