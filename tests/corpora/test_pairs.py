"""A run records how its tasks were converted: the service's profile when it opened, every profile hash the
service had while it was open, and the engine versions the fleet reported meanwhile."""

from __future__ import annotations

import pytest

from conversion.profiles import DEFAULT, PRESETS
from corpora.models import Run
from corpora.pairs import RUN_ENGINE_VERSIONS_MAX, run_open, runs_engine_versions_note, runs_profile_note
from services.actions import service_profile_set, service_register
from services.models import Service
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db

ARXIV = PRESETS["arxiv"].profile
V087, V088 = "latexmlc (LaTeXML version 0.8.7)", "latexmlc (LaTeXML version 0.8.8)"


@pytest.fixture
def runs(corpus_root) -> dict[str, Run]:
    """Open runs of tex_to_html on corpora a and b, and of `oxide` (engine latexml-oxide) on a."""
    imported(corpus_root, "a", documents=1)
    imported(corpus_root, "b", documents=1)
    service_register(name="oxide", actor="tester", profile={"engine": "latexml-oxide"})
    for corpus, service in (("a", "tex_to_html"), ("b", "tex_to_html"), ("a", "oxide")):
        activated(corpus, service)
    return {
        f"{run.corpus.name}/{run.service.name}": run
        for run in Run.objects.filter(finished_at__isnull=True).select_related("corpus", "service")
    }


def test_a_run_opens_with_its_services_profile_in_full_its_hash_and_its_engine(runs):
    run = runs["a/tex_to_html"]
    assert (run.engine, run.profile, run.profile_hash, run.profile_hashes) == (
        "latexmlc", DEFAULT.as_json(), DEFAULT.digest, [DEFAULT.digest],
    )  # fmt: skip
    assert runs["a/oxide"].engine == "latexml-oxide" and runs["a/oxide"].profile["engine"] == "latexml-oxide"
    service_profile_set(name="tex_to_html", actor="tester", preset="arxiv")
    service = Service.objects.get(name="tex_to_html")
    reopened = run_open(corpus_id=run.corpus_id, service_id=service.pk, owner="tester", description="rerun")
    assert (reopened.profile, reopened.profile_hash, reopened.profile_hashes) == (
        ARXIV.as_json(), ARXIV.digest, [ARXIV.digest],
    )  # fmt: skip
    closed = Run.objects.get(pk=run.pk)
    assert closed.finished_at is not None and closed.profile_hashes == [DEFAULT.digest, ARXIV.digest]


def test_a_profile_change_is_noted_once_on_the_services_open_runs_only(runs):
    service = Service.objects.get(name="tex_to_html")
    assert runs_profile_note(service_id=service.pk, profile_hash=ARXIV.digest) == 2
    assert runs_profile_note(service_id=service.pk, profile_hash=ARXIV.digest) == 0
    for key in ("a/tex_to_html", "b/tex_to_html"):
        assert Run.objects.get(pk=runs[key].pk).profile_hashes == [DEFAULT.digest, ARXIV.digest]
    assert Run.objects.get(pk=runs["a/oxide"].pk).profile_hashes == [runs["a/oxide"].profile_hash]


def test_the_fleets_engine_versions_are_kept_sorted_and_distinct_on_the_open_runs_of_their_service(runs):
    tex, oxide = (Service.objects.get(name=name).pk for name in ("tex_to_html", "oxide"))
    assert runs_engine_versions_note({tex: {V088}, oxide: {"latexml-oxide 0.1.0"}}) == 3
    assert runs_engine_versions_note({tex: {V087, V088}}) == 2
    assert runs_engine_versions_note({tex: {V087}}) == 0  # nothing new: nothing written
    assert runs_engine_versions_note({}) == 0
    assert Run.objects.get(pk=runs["a/tex_to_html"].pk).engine_versions == [V087, V088]  # a mixed fleet
    assert Run.objects.get(pk=runs["a/oxide"].pk).engine_versions == ["latexml-oxide 0.1.0"]
    Run.objects.filter(pk=runs["b/tex_to_html"].pk).update(finished_at=runs["b/tex_to_html"].started_at)
    runs_engine_versions_note({tex: {"latexmlc (LaTeXML version 0.9.0)"}})
    assert Run.objects.get(pk=runs["b/tex_to_html"].pk).engine_versions == [V087, V088]  # closed: kept as it was
    runs_engine_versions_note({oxide: {f"latexml-oxide 0.{n}" for n in range(40)}})
    assert len(Run.objects.get(pk=runs["a/oxide"].pk).engine_versions) == RUN_ENGINE_VERSIONS_MAX
