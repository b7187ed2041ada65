"""Deleting a corpus, a service or a pair removes its result archives from disk after the commit, and
says how many; other pairs' archives stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpora.models import Task
from corpora.results import DISCARDED, discarded_remove, result_path
from jobs.models import Job, JobState
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db


@pytest.fixture
def results_dir(tmp_path: Path, settings) -> Path:
    settings.RESULTS_DIR = tmp_path / "results"
    return settings.RESULTS_DIR


def _archives(results_dir: Path, corpus: str, service: str) -> list[Path]:
    """Write a result archive for every task of the pair, as ingestion would keep it."""
    paths = []
    for task in Task.objects.filter(corpus__name=corpus, service__name=service):
        path = result_path(results_dir, task.corpus_id, task.service_id, task.pk)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
        paths.append(path)
    return paths


def _live(results_dir: Path) -> set[Path]:
    return {path for path in results_dir.rglob("*.zip") if DISCARDED not in path.parts}


@pytest.fixture
def two_corpora(corpus_root: Path, results_dir: Path) -> dict[tuple[str, str], list[Path]]:
    archives = {}
    for corpus in ("a", "b"):
        imported(corpus_root, corpus, documents=3)
        for service in ("tex_to_html", "other"):
            activated(corpus, service=service)
            archives[corpus, service] = _archives(results_dir, corpus, service)
    return archives


def test_deleting_a_corpus_removes_its_archives_and_says_how_many(
    authed, two_corpora, results_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = authed.delete("/api/corpora/a?confirm=a")
    assert response.status_code == 204 and response.content == b""
    assert response["X-Result-Files"] == "6" and "X-Result-Files-Job" not in response
    assert _live(results_dir) == set(two_corpora["b", "tex_to_html"] + two_corpora["b", "other"])
    assert not list((results_dir / DISCARDED).iterdir())  # removed, not only moved aside


def test_deactivating_a_pair_removes_only_that_pairs_archives(
    authed, two_corpora, results_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = authed.delete("/api/corpora/a/services/other?confirm=other")
    assert response.status_code == 204 and response["X-Result-Files"] == "3"
    kept = two_corpora["a", "tex_to_html"] + two_corpora["b", "tex_to_html"] + two_corpora["b", "other"]
    assert _live(results_dir) == set(kept)


def test_deleting_a_service_removes_its_archives_in_every_corpus(
    authed, two_corpora, results_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = authed.delete("/api/services/tex_to_html?confirm=tex_to_html")
    assert response.status_code == 204 and response["X-Result-Files"] == "6"
    assert _live(results_dir) == set(two_corpora["a", "other"] + two_corpora["b", "other"])


def test_nothing_is_removed_before_the_deletion_commits(authed, two_corpora, results_dir):
    # Inside the test's transaction the deletion has not committed: the archives must still be there.
    response = authed.delete("/api/corpora/a?confirm=a")
    assert response.status_code == 204 and response["X-Result-Files"] == "6"
    assert len(_live(results_dir)) == 12


def test_a_refused_deletion_removes_no_archive(authed, two_corpora, results_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = authed.delete("/api/corpora/a?confirm=wrong")
    assert response.status_code == 400
    assert len(_live(results_dir)) == 12


def test_many_archives_are_removed_by_a_job_and_leave_the_live_tree_at_once(
    authed, two_corpora, results_dir, settings, django_capture_on_commit_callbacks, purge_broker
):
    settings.RESULTS_REMOVE_INLINE = 2
    with django_capture_on_commit_callbacks(execute=True):
        response = authed.delete("/api/corpora/a?confirm=a")
    assert response.status_code == 204 and response["X-Result-Files"] == "6"
    job = Job.objects.get(uuid=response["X-Result-Files-Job"])
    assert job.kind == "results_remove" and job.params["files"] == 6
    assert len(_live(results_dir)) == 6  # corpus a's archives left the live tree with the commit
    assert sum(1 for p in (results_dir / DISCARDED).rglob("*.zip")) == 6
    job_run(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.result == {"files_removed": 6}
    assert not list((results_dir / DISCARDED).iterdir())
    assert len(_live(results_dir)) == 6


def test_the_screens_say_how_many_archives_were_removed(
    screen_client, two_corpora, results_dir, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = screen_client.post("/corpora/a/delete", {"confirm": "a"}, follow=True)
    assert response.status_code == 200
    assert "6 result archives removed from disk." in response.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = screen_client.post("/services/other/delete", {"confirm": "other"}, follow=True)
    assert "3 result archives removed from disk." in response.content.decode()
    assert _live(results_dir) == set(two_corpora["b", "tex_to_html"])


def test_the_removal_job_refuses_names_outside_the_discarded_directory(results_dir):
    for name in ("../a", "", "..", "x/y"):
        with pytest.raises(ValueError, match="not a discarded directory name"):
            discarded_remove(names=[name])
