"""Pruning of run history: the command, its dry run, the retention screen, and the API that cannot prune.
History is built without conversions: statuses set by the test, runs closed and opened through the
runs actions, dates spread with set-based updates."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from io import StringIO
from itertools import pairwise
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from accounts.actions import token_create
from accounts.models import AuditEntry
from corpora.actions.diffs import diff_ensure, diff_rows_ensure
from corpora.models import Corpus, Run, Snapshot, SnapshotDiff, Task, TaskDiff
from corpora.pairs import run_close, run_open
from corpora.queries.prune import prune_preview
from runs.serializers import PruneSummarySerializer
from services.models import Service
from tests.corpora.helpers import activated, imported

pytestmark = pytest.mark.django_db

BASE = datetime(2020, 1, 1, tzinfo=UTC)
# Statuses a close leaves, shifted by one document each time, so that every document changes.
STATUSES = (-1, -2, -3, -4)


def _history(
    root: Path, corpus: str, service: str = "tex_to_html", *, closes: int = 3, documents: int = 4
) -> list[int]:
    """A pair with `closes` closed runs, each with its snapshot, then one open run; run n (from 0) starts
    at BASE + 10n days and ends an hour later, when its snapshot is taken. Each two consecutive snapshots
    have their diff, in which every document changed. Returns the snapshot ids, oldest first."""
    if not Corpus.objects.filter(name=corpus).exists():
        imported(root, corpus, documents=documents)
    activated(corpus, service)  # opens the first run
    pair = {"corpus__name": corpus, "service__name": service}
    corpus_id, service_id = Corpus.objects.get(name=corpus).pk, Service.objects.get(name=service).pk
    tasks = list(Task.objects.filter(**pair).order_by("document_id").values_list("pk", flat=True))
    for close in range(closes):
        for index, task in enumerate(tasks):
            Task.objects.filter(pk=task).update(status=STATUSES[(index + close) % len(STATUSES)])
        run_close(corpus_id=corpus_id, service_id=service_id)
        run_open(corpus_id=corpus_id, service_id=service_id, owner="tester")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE corpora_run r SET started_at = %s + (o.n - 1) * interval '10 days',"
            " finished_at = CASE WHEN r.finished_at IS NULL THEN NULL"
            "  ELSE %s + (o.n - 1) * interval '10 days' + interval '1 hour' END"
            " FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM corpora_run"
            "  WHERE corpus_id = %s AND service_id = %s) o WHERE o.id = r.id",
            [BASE, BASE, corpus_id, service_id],
        )
        cursor.execute(
            "UPDATE corpora_snapshot s SET taken_at = %s + (o.n - 1) * interval '10 days' + interval '1 hour'"
            " FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM corpora_snapshot"
            "  WHERE corpus_id = %s AND service_id = %s) o WHERE o.id = s.id",
            [BASE, corpus_id, service_id],
        )
    pair_snapshots = Snapshot.objects.filter(corpus_id=corpus_id, service_id=service_id).order_by("taken_at")
    snapshots = list(pair_snapshots.values_list("pk", flat=True))
    for previous, current in pairwise(snapshots):
        diff_rows_ensure(diff_ensure(previous_id=previous, current_id=current))
    return snapshots


def _rows() -> dict[str, int]:
    models = {"runs": Run, "snapshots": Snapshot, "diffs": SnapshotDiff, "diff_rows": TaskDiff}
    return {name: model.objects.count() for name, model in models.items()}


def _prune(*args: str) -> list[str]:
    out = StringIO()
    call_command("prune_history", *args, stdout=out)
    return out.getvalue().splitlines()


def _day(days: float) -> str:
    return (BASE + timedelta(days=days)).isoformat()


def test_a_dry_run_prints_the_counts_and_changes_nothing(corpus_root):
    _history(corpus_root, "a")
    before = _rows()
    lines = _prune("--before", _day(15), "--dry-run")
    assert "dry run" in lines[0]
    assert lines[1].startswith("a/tex_to_html: 2 runs, 2 snapshots, 2 diffs, 8 diff rows, ")
    assert lines[2].startswith("total: 2 runs, 2 snapshots, 2 diffs, 8 diff rows, ")
    assert int(lines[2].split(", ")[-1].removesuffix(" bytes")) > 0
    assert _rows() == before
    assert not AuditEntry.objects.filter(action="runs.prune").exists()


def test_a_prune_removes_exactly_what_the_dry_run_printed_and_only_before_the_date(corpus_root):
    _history(corpus_root, "a")
    cutoff = _day(15)
    before = _rows()
    printed = _prune("--before", cutoff, "--dry-run")
    removed = _prune("--before", cutoff)
    assert removed[0].endswith("removed") and removed[1:] == printed[1:]
    after = _rows()
    assert {key: before[key] - after[key] for key in before} == {"runs": 2, "snapshots": 2, "diffs": 2, "diff_rows": 8}
    cut = BASE + timedelta(days=15)
    assert not Run.objects.filter(finished_at__lt=cut).exists()
    assert Run.objects.filter(finished_at__gte=cut).count() == 1
    assert Run.objects.filter(finished_at__isnull=True).count() == 1
    assert list(Snapshot.objects.values_list("taken_at", flat=True)) == [BASE + timedelta(days=20, hours=1)]
    entry = AuditEntry.objects.get(action="runs.prune")
    assert entry.actor.startswith("cli") and entry.outcome == "ok" and entry.target == "*/*"
    assert entry.params["removed"]["runs"] == 2 and entry.params["pairs"] == ["a/tex_to_html"]
    assert _prune("--before", cutoff)[1:] == ["total: 0 runs, 0 snapshots, 0 diffs, 0 diff rows, 0 bytes"]


def test_a_cutoff_in_the_future_spares_the_open_run_and_the_latest_snapshot_of_each_pair(corpus_root):
    _history(corpus_root, "a")
    _history(corpus_root, "a", "tex_to_html_next", closes=2)
    summary = prune_preview(datetime(2999, 1, 1, tzinfo=UTC))
    assert [(p.service, p.runs, p.snapshots, p.diffs) for p in summary.pairs] == [
        ("tex_to_html", 3, 2, 2),
        ("tex_to_html_next", 2, 1, 1),
    ]
    _prune("--before", "2999-01-01")
    assert Run.objects.count() == 2 and not Run.objects.filter(finished_at__isnull=False).exists()
    latest = Snapshot.objects.values_list("service__name", "taken_at").order_by("service__name")
    assert list(latest) == [
        ("tex_to_html", BASE + timedelta(days=20, hours=1)),
        ("tex_to_html_next", BASE + timedelta(days=10, hours=1)),
    ]
    assert not SnapshotDiff.objects.exists() and not TaskDiff.objects.exists()


def test_corpus_and_service_narrow_the_prune(corpus_root):
    _history(corpus_root, "a")
    _history(corpus_root, "a", "tex_to_html_next")
    _history(corpus_root, "b")
    future = "2999-01-01"

    def pairs(*args: str) -> list[str]:
        return [line.split(":")[0] for line in _prune("--before", future, "--dry-run", *args)[1:-1]]

    assert pairs() == ["a/tex_to_html", "a/tex_to_html_next", "b/tex_to_html"]
    assert pairs("--corpus", "a") == ["a/tex_to_html", "a/tex_to_html_next"]
    assert pairs("--service", "tex_to_html") == ["a/tex_to_html", "b/tex_to_html"]
    assert pairs("--corpus", "a", "--service", "tex_to_html_next") == ["a/tex_to_html_next"]
    untouched = Snapshot.objects.exclude(corpus__name="b").count()
    _prune("--before", future, "--corpus", "b")
    assert Snapshot.objects.filter(corpus__name="b").count() == 1
    assert Snapshot.objects.exclude(corpus__name="b").count() == untouched
    assert Run.objects.filter(corpus__name="a", finished_at__isnull=False).count() == 6


def test_diffs_of_removed_snapshots_go_with_them_and_the_diff_api_still_works(api, corpus_root):
    snapshots = _history(corpus_root, "a", closes=4)
    pair = "/api/runs/a/tex_to_html"
    first_date = api.get(f"{pair}/diff").json()["available_dates"][-1]
    # A run that ends after the cutoff although its snapshot was taken before it: kept, its link cut.
    Run.objects.filter(snapshot_id=snapshots[1]).update(finished_at=BASE + timedelta(days=16))
    _prune("--before", _day(15))
    assert set(Snapshot.objects.values_list("pk", flat=True)) == set(snapshots[2:])
    (kept_diff,) = SnapshotDiff.objects.all()
    assert (kept_diff.previous_id, kept_diff.current_id) == (snapshots[2], snapshots[3])
    assert set(TaskDiff.objects.values_list("diff_id", flat=True)) == {kept_diff.pk}
    runs = api.get(pair).json()
    assert [r["snapshot_at"] is None for r in runs] == [True, False, False, True]  # open, 4th, 3rd, 2nd
    diff = api.get(f"{pair}/diff").json()
    assert len(diff["available_dates"]) == 2 and diff["changed"] == 4
    assert len(api.get(f"{pair}/tasks").json()) == 4
    assert api.get(f"{pair}/diff", {"previous": first_date}).status_code == 404


def test_a_malformed_date_or_an_unknown_name_is_a_clear_command_error_and_changes_nothing(corpus_root):
    _history(corpus_root, "a", closes=2)
    before = _rows()
    for date in ("yesterday", "2020-13-01", "2020-02-30", "2020-01-01T25:00"):
        with pytest.raises(CommandError, match="is not a date: use a date YYYY-MM-DD"):
            _prune("--before", date)
    with pytest.raises(CommandError, match="No corpus named 'nope'"):
        _prune("--before", "2999-01-01", "--corpus", "nope")
    with pytest.raises(CommandError, match="No service named 'nope'"):
        _prune("--before", "2999-01-01", "--service", "nope", "--dry-run")
    assert _rows() == before
    # A date is its midnight in the server's time zone (UTC): only the first run ended before 2020-01-02.
    assert _prune("--before", "2020-01-02", "--dry-run")[-1].startswith("total: 1 runs, 1 snapshots, 1 diffs")
    assert _prune("--before", "2020-01-01T00:30:00+00:00", "--dry-run")[-1].startswith("total: 0 runs")
    assert _prune("--before", "2020-01-01T03:30:00+02:00", "--dry-run")[-1].startswith("total: 1 runs")


# --- the retention screen -------------------------------------------------------------------------


@pytest.fixture
def admin_client(client: Client) -> Client:
    _, raw = token_create(actor="boss", created_by="pytest", staff=True)
    assert client.post("/login", {"token": raw}).status_code == 302
    return client


def test_the_retention_screen_previews_the_numbers_the_command_prints(admin_client, corpus_root):
    _history(corpus_root, "a")
    _history(corpus_root, "b", closes=2)
    screen = admin_client.get("/runs/retention", {"before": _day(15)})
    assert screen.status_code == 200
    summary = screen.context["summary"]
    assert summary == PruneSummarySerializer(prune_preview(BASE + timedelta(days=15))).data
    total = summary["total"]
    printed = _prune("--before", _day(15), "--dry-run")
    assert printed[-1] == (
        f"total: {total['runs']} runs, {total['snapshots']} snapshots, {total['diffs']} diffs,"
        f" {total['diff_rows']} diff rows, {total['bytes']} bytes"
    )
    assert [p["corpus"] for p in summary["pairs"]] == ["a", "b"]
    body = screen.content.decode()
    assert 'id="retention-prune"' in body and f'data-bytes="{total["bytes"]}"' in body
    assert admin_client.get("/runs/retention", {"before": _day(15), "corpus": "b"}).context["summary"]["pairs"] == [
        summary["pairs"][1]
    ]


def test_the_retention_screen_prunes_only_after_confirmation_and_journals_who_pruned_what(admin_client, corpus_root):
    _history(corpus_root, "a")
    form = {"before": _day(15), "corpus": "", "service": ""}
    expected = asdict(prune_preview(BASE + timedelta(days=15)).total)
    before = _rows()
    for confirm in ({}, {"confirm": "2020-01-16"}):
        refused = admin_client.post("/runs/retention", {**form, **confirm})
        assert refused.status_code == 400 and "into the confirmation field" in refused.content.decode()
        assert refused.context["summary"]["total"] == expected
    assert _rows() == before and not AuditEntry.objects.filter(action="runs.prune").exists()
    done = admin_client.post("/runs/retention", {**form, "confirm": form["before"]}, follow=True)
    assert done.redirect_chain[0][0].startswith("/runs/retention?before=")
    assert "Pruned 2 runs, 2 snapshots and 2 diffs (8 diff rows)" in done.content.decode()
    assert done.context["summary"]["pairs"] == []
    after = _rows()
    assert {key: before[key] - after[key] for key in before} == {k: v for k, v in expected.items() if k != "bytes"}
    entry = AuditEntry.objects.get(action="runs.prune")
    assert entry.actor == "boss" and entry.outcome == "ok" and entry.params["removed"] == expected
    assert entry.params["before"] == (BASE + timedelta(days=15)).isoformat()


def test_the_retention_screen_is_for_admins_only_and_says_what_is_wrong_with_a_date(screen_client, corpus_root):
    anonymous = Client().get("/runs/retention")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login?next=/runs/retention")
    _history(corpus_root, "a")
    before = _rows()
    assert screen_client.get("/runs/retention", {"before": "2999-01-01"}).status_code == 403
    posted = screen_client.post("/runs/retention", {"before": "2999-01-01", "confirm": "2999-01-01"})
    assert posted.status_code == 403 and _rows() == before
    get_user_model().objects.filter(username="tester").update(is_staff=True)
    bad = screen_client.get("/runs/retention", {"before": "soon"})
    assert bad.status_code == 400 and "is not a date" in bad.content.decode()
    unknown = screen_client.get("/runs/retention", {"before": "2999-01-01", "corpus": "nope"})
    assert unknown.status_code == 404 and "No corpus named" in unknown.content.decode()
    assert screen_client.get("/runs/retention").status_code == 200


def test_nothing_in_the_api_deletes_history(authed, corpus_root):
    _history(corpus_root, "a")
    before = _rows()
    pair = "/api/runs/a/tex_to_html"
    for url in ("/api/runs", pair, f"{pair}/current", f"{pair}/diff", f"{pair}/tasks",
                "/api/corpora/a/services/tex_to_html/snapshot", "/api/runs/retention", "/api/runs/prune"):  # fmt: skip
        assert authed.delete(url).status_code in (404, 405), url
    assert authed.post("/api/runs", {"before": "2999-01-01"}).status_code in (404, 405)
    endpoints = authed.get("/api").content.decode().lower()
    assert "prune" not in endpoints and "retention" not in endpoints
    assert _rows() == before
