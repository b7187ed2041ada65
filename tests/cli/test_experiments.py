"""ccs experiment start, ccs experiments and ccs experiment show against a live server: the variants from
inline JSON or a file, the job it starts, and the ranking as the API answers it."""

from __future__ import annotations

import json

import pytest

from corpora.models import Experiment
from jobs.models import Job
from jobs.runner import job_run
from services.models import Service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

VARIANTS = [{"name": "styles", "changes": {"includestyles": True}}, {"name": "control"}]


def test_ccs_starts_an_experiment_lists_it_and_shows_its_ranking(ccs, pair, tmp_path, http):
    started = ccs(
        "experiment", "start", "a", "tex_to_html", "--name", "e1", "--variants-json", json.dumps(VARIANTS),
        "--yes", "--json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)
    assert job["kind"] == "experiment_run"
    job_run(Job.objects.get(uuid=job["uuid"]).pk)
    assert set(Service.objects.filter(name__startswith="e1.").values_list("name", flat=True)) == {
        "e1.styles", "e1.control",
    }  # fmt: skip

    listed = ccs("experiments")
    assert listed.returncode == 0, listed.stderr
    assert "e1" in listed.stdout and "styles, control" in listed.stdout and "succeeded" in listed.stdout
    shown = ccs("experiment", "show", "e1", "--json")
    assert json.loads(shown.stdout) == http.get("/api/experiments/e1").json()
    table = ccs("experiment", "show", "e1")
    assert table.returncode == 0 and "rank" in table.stdout and "e1" in table.stdout

    variants = tmp_path / "variants.json"
    variants.write_text(json.dumps([{"name": "long", "changes": {"timeout_seconds": 600}}]))
    start = ("experiment", "start", "a", "tex_to_html", "--name", "e2")
    from_file = ccs(*start, "--variants-file", str(variants), "--yes")
    assert from_file.returncode == 0, from_file.stderr
    assert list(Experiment.objects.get(name="e2").variants.values_list("name", flat=True)) == ["long"]


def test_ccs_experiment_start_needs_the_variants_once_and_reports_the_server_s_refusal(ccs, pair, tmp_path):
    neither = ccs("experiment", "start", "a", "tex_to_html", "--name", "e3", "--yes")
    assert neither.returncode == 2 and "--variants-json or --variants-file" in neither.stderr
    garbled = ccs("experiment", "start", "a", "tex_to_html", "--name", "e3", "--variants-json", "[{", "--yes")
    assert garbled.returncode == 2 and "no JSON" in garbled.stderr
    refused = ccs(
        "experiment", "start", "a", "tex_to_html", "--name", "e3", "--variants-json",
        json.dumps([{"name": "x", "changes": {"nosuch": 1}}]), "--yes",
    )  # fmt: skip
    assert refused.returncode == 1 and "Bad request (400)" in refused.stderr and "nosuch" in refused.stderr
    assert not Experiment.objects.exists()
