"""Package attribution through the system: package rows written with each task's messages by the one
message writer, from log text parsed as the dispatcher parses it; the ranking, the papers behind a row,
the export and the run diff through the API, the screens (Django's test client here; Chromium in
tests/screens/test_runs_screens.py) and ccs; and a run's ranking frozen with its snapshot."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F, Sum

from conversion.choices import PackageFlag
from conversion.logparse import parse_log
from corpora.actions.corpora import service_deactivate
from corpora.actions.reports import rerun
from corpora.message_store import messages_delete, messages_purge_retired, messages_write
from corpora.models import PackageTally, PackageUsage, Run, SnapshotPackage, Task, TaskPackage
from tests.conversion.test_attribution import IN_MATHPAR, MISSING_MINTED, PREAMBLE, TEXMF, UNDEFINED
from tests.corpora.helpers import activated, imported
from tests.reports.messages import message_tables_problems
from tests.runs.helpers import pair_close, pair_tasks
from tests.support import migrate

pytestmark = pytest.mark.django_db

PAIR = "/api/runs/a/tex_to_html"
MATHPAR_RAW = f"(Processing definitions {TEXMF}/mathpartir/mathpartir.sty... 0.2 sec)\n"
# doc0 clean; doc1 fails only for minted (weakly: undefined macros); doc2 fails only inside mathpartir;
# doc3 is killed at its limit with minted missing too.
LOGS = [
    PREAMBLE + "Status:conversion:0\n",
    PREAMBLE + MISSING_MINTED + UNDEFINED + "Status:conversion:2\n",
    PREAMBLE + MATHPAR_RAW + IN_MATHPAR + IN_MATHPAR + "Status:conversion:2\n",
    PREAMBLE + MISSING_MINTED + "Fatal:limit:timeout killed after 300 s\nStatus:conversion:3\n",
]
# After the fix: minted gone from doc1, which is clean now.
LOGS_AFTER = [LOGS[0], PREAMBLE + "Status:conversion:0\n", LOGS[2], LOGS[3]]


def logs_write(logs: list[str]) -> None:
    """Each task of pair a/tex_to_html (document order) gets its log's status and messages, written as
    ingestion writes them."""
    with transaction.atomic(), connection.cursor() as cursor:
        for task, log in zip(pair_tasks(), logs, strict=True):
            parsed = parse_log(log)
            Task.objects.filter(pk=task.pk).update(status=parsed.status)
            messages_delete(cursor, [task.pk])
            messages_write(cursor, [(task.pk, task.corpus_id, task.service_id, parsed.status, parsed.messages)])


@pytest.fixture
def packages(corpus_root) -> None:
    imported(corpus_root, "a", documents=4)
    activated("a")
    logs_write(LOGS)


def _rows(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["package"]: row for row in answer["rows"]}


def test_the_ranking_counts_papers_statuses_only_missing_and_cleared_papers(api, packages):
    response = api.get(f"{PAIR}/packages")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["run"] is None and answer["taken_at"] is None
    assert [row["package"] for row in answer["rows"]][:2] == ["mathpartir", "minted"]  # clears first
    rows = _rows(answer)
    assert answer["count"] == len(rows) == 5  # article, amsmath, keyval, mathpartir, minted
    assert rows["mathpartir"] | {"statuses": None} == {
        "kind": "package", "package": "mathpartir", "papers": 1, "statuses": None, "only_missing": 0,
        "clears": 1, "clears_weak": 1, "evidence": ["error_in_definitions", "loaded", "raw"],
    }  # fmt: skip
    assert rows["minted"]["statuses"] == {"no_problem": 0, "warning": 0, "error": 1, "fatal": 1, "invalid": 0}
    assert (rows["minted"]["papers"], rows["minted"]["only_missing"]) == (2, 2)
    assert (rows["minted"]["clears"], rows["minted"]["clears_weak"]) == (0, 1)  # weak never clears for certain
    assert rows["minted"]["evidence"] == ["missing", "weak"]
    assert rows["article"]["kind"] == "class" and rows["article"]["papers"] == 4
    assert _rows(api.get(f"{PAIR}/packages", {"kind": "class"}).json()).keys() == {"article"}
    assert api.get(f"{PAIR}/packages", {"kind": "font"}).status_code == 400
    assert api.get("/api/runs/a/nothing/packages").status_code == 404


def test_the_papers_behind_a_row_and_the_export(api, packages):
    papers = api.get(f"{PAIR}/packages/package/minted").json()
    assert [(p["document"], p["status"], p["clears_weak"], p["only_missing"]) for p in papers] == [
        ("doc1", "error", True, True),
        ("doc3", "fatal", False, True),
    ]
    assert papers[0]["url"] == "/corpus/a/tex_to_html/document/doc1"
    response = api.get(f"{PAIR}/packages/export")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == TaskPackage.objects.count() == 4 + 4 + 4 + 1 + 2
    assert {"kind": "package", "package": "mathpartir", "document": "doc2", "status": "error", "only_missing": "False",
            "clears": "True", "clears_weak": "True", "evidence": "error_in_definitions loaded raw"} in rows  # fmt: skip


def test_package_rows_go_with_their_messages(packages):
    task = pair_tasks()[1]
    flags = TaskPackage.objects.filter(task_id=task.pk, package="minted").values_list("flags", flat=True)
    assert list(flags) == [PackageFlag.MISSING | PackageFlag.ONLY | PackageFlag.WEAK | PackageFlag.CLEARS_WEAK]
    with transaction.atomic(), connection.cursor() as cursor:
        messages_delete(cursor, [task.pk])
    assert not TaskPackage.objects.filter(task_id=task.pk).exists()
    assert TaskPackage.objects.count() == 4 + 4 + 1 + 2
    # The tallies the ranking sums lose the task too.
    assert message_tables_problems() == []
    assert PackageTally.objects.filter(tasks__gt=0).aggregate(Sum("tasks"))["tasks__sum"] == 4 + 4 + 1 + 2


def test_the_ranking_sums_the_tallies_which_a_pair_purge_takes_with_it(api, packages):
    """The ranking reads the tallies, not the package rows: tallies made to disagree show in it. (Only this
    test breaks them; message_tables_problems names the disagreement.)"""
    minted = PackageTally.objects.filter(package_usage_id__in=PackageUsage.objects.filter(package="minted"))
    assert minted.count() == 2 and minted.aggregate(Sum("tasks"))["tasks__sum"] == 2
    minted.update(tasks=F("tasks") + 10)
    assert _rows(api.get(f"{PAIR}/packages").json())["minted"]["papers"] == 22
    assert message_tables_problems() == ["package tallies are not a recount of the package rows: 2"]
    service_deactivate(corpus_name="a", service_name="tex_to_html", confirm="tex_to_html", actor="tester")
    assert not PackageTally.objects.exists() and not TaskPackage.objects.exists()
    assert message_tables_problems() == []


@pytest.mark.django_db(transaction=True)
def test_the_tally_migration_counts_the_package_rows_there_are(api, packages):
    """Corpora migration 0019 builds the usages, tallies and snapshot tallies from the package rows, and trims
    each snapshot's papers to those that showed trouble: every ranking, live and frozen, reads the same."""
    pair_close()
    run = Run.objects.get(finished_at__isnull=False).pk
    before = [api.get(f"{PAIR}/packages", query).json() for query in ({}, {"run": run})]
    assert _rows(before[1])["article"]["papers"] == 4
    migrate([("corpora", "0018_snapshot_infrastructure_documents")])
    try:
        with connection.cursor() as cursor:  # the snapshot as 0018 froze it: every paper of each package
            cursor.execute(
                "UPDATE corpora_snapshotpackage s SET document_ids = k.d, statuses = k.s, flags = k.f FROM ("
                " SELECT kind, package, array_agg(document_id ORDER BY document_id) AS d,"
                " array_agg(task_status ORDER BY document_id) AS s, array_agg(flags ORDER BY document_id) AS f"
                " FROM corpora_taskpackage GROUP BY 1, 2) k WHERE (s.kind, s.package) = (k.kind, k.package)"
            )
            assert cursor.rowcount == 5
    finally:
        migrate()
    assert message_tables_problems() == []
    assert [api.get(f"{PAIR}/packages", query).json() for query in ({}, {"run": run})] == before
    assert api.get(f"{PAIR}/packages/class/article", {"run": run}).json() == []
    assert [p["document"] for p in api.get(f"{PAIR}/packages/package/minted", {"run": run}).json()] == ["doc1", "doc3"]


def test_a_run_keeps_its_ranking_and_the_diff_names_the_papers_gained_and_lost(api, packages):
    pair_close()
    first = Run.objects.get(finished_at__isnull=False)
    assert SnapshotPackage.objects.filter(snapshot_id=first.snapshot_id).count() == 5
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", description="minted fixed")
    # Retired messages count nowhere: the live ranking is empty until the results come; the purge takes
    # their package rows with them.
    assert api.get(f"{PAIR}/packages").json()["count"] == 0
    assert TaskPackage.objects.exists()
    assert message_tables_problems() == []  # the package tallies count them until the purge
    assert PackageTally.objects.filter(tasks__gt=0).exists()
    while messages_purge_retired():
        pass
    assert not TaskPackage.objects.exists()
    assert message_tables_problems() == []
    logs_write(LOGS_AFTER)
    assert message_tables_problems() == []
    pair_close()
    live = _rows(api.get(f"{PAIR}/packages").json())
    assert live["minted"]["papers"] == 1
    frozen = api.get(f"{PAIR}/packages", {"run": first.pk}).json()
    assert frozen["run"] == first.pk and frozen["taken_at"] is not None
    assert _rows(frozen)["minted"]["papers"] == 2 and _rows(frozen)["minted"]["clears_weak"] == 1
    assert [p["document"] for p in api.get(f"{PAIR}/packages/package/minted", {"run": first.pk}).json()] == [
        "doc1", "doc3",
    ]  # fmt: skip
    # A closed run keeps the papers that showed trouble with a package, not those that merely loaded it.
    assert api.get(f"{PAIR}/packages/class/article", {"run": first.pk}).json() == []
    assert len(api.get(f"{PAIR}/packages/class/article").json()) == 4
    assert _rows(frozen)["article"]["papers"] == 4
    assert api.get(f"{PAIR}/packages", {"run": first.pk + 1000}).status_code == 404
    diff = api.get(f"{PAIR}/packages/diff").json()
    changes = [
        (c["package"], c["gained"], c["lost"], c["previous_papers"], c["current_papers"]) for c in diff["changes"]
    ]
    assert changes == [("minted", [], ["doc1"], 2, 1)]
    assert (diff["changes"][0]["previous_clears"], diff["changes"][0]["current_clears"]) == (0, 0)


def test_a_result_that_comes_before_the_purge_takes_the_retired_usages_off(api, packages):
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", description="minted fixed")
    logs_write(LOGS_AFTER)  # each task's retired rows go with its new result's writing
    assert message_tables_problems() == []
    rows = _rows(api.get(f"{PAIR}/packages").json())
    assert (rows["minted"]["papers"], rows["article"]["papers"]) == (1, 4)


def test_the_screens_show_what_the_api_answers(client, packages):
    page = client.get("/runs/a/tex_to_html/packages")
    assert page.status_code == 200
    body = page.content.decode()
    assert body.index('data-package="package:mathpartir"') < body.index('data-package="package:minted"')
    assert 'href="/runs/a/tex_to_html/packages/package/minted"' in body
    papers = client.get("/runs/a/tex_to_html/packages/package/minted").content.decode()
    assert 'data-document="doc1"' in papers and 'data-document="doc3"' in papers
    pair_close()
    run = Run.objects.get(finished_at__isnull=False).pk
    frozen = client.get("/runs/a/tex_to_html/packages/class/article", {"run": run}).content.decode()
    assert f"Run {run} is closed" in frozen and "No paper of the run showed trouble with it." in frozen
    assert client.get("/runs/a/tex_to_html/packages/diff").status_code == 200
    assert client.get("/runs/a/tex_to_html/packages", {"kind": "font"}).status_code == 400
