"""Message classes in snapshots: what a snapshot freezes of them, the class diff of two snapshots, the
documents that gained or lost a class, and a document's history, through the API and its screens, on
tasks whose statuses and messages the test writes through the one message writer (no conversion)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.db import connection

from corpora import pairs
from corpora.actions.history import history_prune
from corpora.actions.reports import rerun
from corpora.models import Snapshot, SnapshotClass, SnapshotMembers
from corpora.queries import classes
from tests.corpora.helpers import activated, imported
from tests.reports.messages import message_tables_problems
from tests.runs.helpers import classes_write, pair_close, pair_tasks

pytestmark = pytest.mark.django_db

PAIR = "/api/runs/a/tex_to_html"
UNDEFINED_A = ("error", "undefined", "\\alpha")
UNDEFINED_B = ("error", "undefined", "\\beta")
MISSING = ("warning", "missing_file", "x.sty")
IO_FATAL = ("fatal", "I/O", "a/b.tex")  # category and what that hold '/'
NOTE = ("info", "note", "hello")
CLASSES = (UNDEFINED_A, UNDEFINED_B, MISSING, IO_FATAL, NOTE)


def _snapshot(api: Any) -> str:
    response = api.post("/api/corpora/a/services/tex_to_html/snapshot")
    assert response.status_code == 202, response.content
    return response.json()["taken_at"]


def _random_having(rng: random.Random, documents: int) -> list[set[tuple[str, str, str]]]:
    return [{c for c in CLASSES if rng.random() < 0.45} for _ in range(documents)]


def _names_with(having: list[set[tuple[str, str, str]]], cls: tuple[str, str, str]) -> set[str]:
    """The documents (in document order, as `having` is) that had the class."""
    names = [task.document.name for task in pair_tasks()]
    return {names[index] for index, had in enumerate(having) if cls in had}


def _class_url(cls: tuple[str, str, str]) -> str:
    severity, category, what = cls
    return f"{PAIR}/classes/{severity}/{category}/{what}/tasks"


def _pages(api: Any, url: str, params: dict[str, Any], size: int) -> list[str]:
    """Every document of a gained/lost list, page by page."""
    names, offset = [], 0
    while True:
        response = api.get(url, {**params, "offset": offset, "page_size": size})
        assert response.status_code == 200, response.content
        page = [row["document"] for row in response.json()]
        names += page
        if len(page) < size:
            return names
        offset += size


IDS_FROM = 10_000_000  # the first document id of the class-diff test


@pytest.mark.parametrize(("seed", "chunk_before", "chunk_after"), [(1, 2, 2), (2, 2, 2), (3, 2, 4), (4, 4, 2)])
def test_the_class_diff_and_its_gained_and_lost_documents_equal_set_differences(
    api, token, corpus_root, monkeypatch, seed, chunk_before, chunk_after
):
    """Chunks of two or four documents on average, so a dozen documents make several chunks per class,
    some equal in both snapshots and some not; with another chunk size in each snapshot, their chunks
    end at other documents, and the comparison must not rely on them being cut alike."""
    rng = random.Random(seed)
    # Chunk ends follow the documents' ids (hashed): ids taken from a fixed point, not from wherever the
    # tests before this one left the sequence, cut the same chunks on every run.
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('corpora_document', 'id'), %s, false)", [IDS_FROM])
    imported(corpus_root, "a", documents=12)
    activated("a")
    before, after = _random_having(rng, 12), _random_having(rng, 12)
    monkeypatch.setattr(pairs, "MEMBERS_CHUNK", chunk_before)
    classes_write(before)
    pair_close()  # the run closes and snapshots
    classes_write(after)
    api.credentials(HTTP_X_SERVICE_TOKEN=token)
    monkeypatch.setattr(pairs, "MEMBERS_CHUNK", chunk_after)
    _snapshot(api)
    assert message_tables_problems() == []

    # What each snapshot froze: per class, tasks and messages (every severity) and the documents (warning or worse).
    old, new = Snapshot.objects.order_by("taken_at")
    assert old.with_classes and new.with_classes
    ids = {task.document.name: task.document_id for task in pair_tasks()}
    for snapshot, having in ((old, before), (new, after)):
        frozen = {
            row.message_class_id: (row.tasks, row.messages)
            for row in SnapshotClass.objects.filter(snapshot_id=snapshot.pk)
        }
        members: dict[int, list[int]] = {}
        for row in SnapshotMembers.objects.filter(snapshot_id=snapshot.pk).order_by("message_class_id", "lo"):
            assert row.document_ids == sorted(set(row.document_ids))
            assert (row.lo, row.hi) == (row.document_ids[0], row.document_ids[-1])
            members.setdefault(row.message_class_id, []).extend(row.document_ids)
        chunks = SnapshotMembers.objects.filter(snapshot_id=snapshot.pk).count()
        assert chunks > len(members)  # cut into several chunks, whose concatenation is ascending:
        expected_counts, expected_members = {}, {}
        for cls in CLASSES:
            names = _names_with(having, cls)
            if names:
                class_id = _class_id(cls)
                expected_counts[class_id] = (len(names), 2 * len(names))
                if cls[0] != "info":
                    expected_members[class_id] = sorted(ids[name] for name in names)
        assert frozen == expected_counts
        assert members == expected_members

    # The class diff: every class whose task count changed, the largest change first.
    diff = api.get(f"{PAIR}/classes").json()
    changes = {(c["severity"], c["category"], c["what"]): c for c in diff}
    expected = {}
    for cls in CLASSES:
        p, c = len(_names_with(before, cls)), len(_names_with(after, cls))
        if p != c:
            kind = "appeared" if p == 0 else "vanished" if c == 0 else "grew" if c > p else "shrank"
            expected[cls] = (kind, p, c, c - p, 2 * p, 2 * c)
    assert {
        cls: (
            c["kind"],
            c["previous_tasks"],
            c["current_tasks"],
            c["change"],
            c["previous_messages"],
            c["current_messages"],
        )
        for cls, c in changes.items()
    } == expected
    assert [abs(c["change"]) for c in diff] == sorted((abs(c["change"]) for c in diff), reverse=True)
    for kind in ("appeared", "vanished", "grew", "shrank"):
        listed = {(c["severity"], c["category"], c["what"]) for c in api.get(f"{PAIR}/classes", {"kind": kind}).json()}
        assert listed == {cls for cls, e in expected.items() if e[0] == kind}, kind
    increased = {(c["severity"], c["category"], c["what"]) for c in api.get(f"{PAIR}/classes?kind=increased").json()}
    assert increased == {cls for cls, e in expected.items() if e[3] > 0}
    failures = api.get(f"{PAIR}/classes", {"severity": "error,fatal"}).json()
    assert {(c["severity"], c["category"], c["what"]) for c in failures} == {
        cls for cls in expected if cls[0] in ("error", "fatal")
    }
    paged = [api.get(f"{PAIR}/classes", {"offset": i, "page_size": 1}).json() for i in range(len(diff) + 1)]
    assert [page[0] for page in paged[:-1]] == diff and paged[-1] == []

    # Gained and lost: the set differences of the documents, in document order, whatever the page size.
    for cls in CLASSES:
        if cls[0] == "info":
            continue
        gained = sorted(_names_with(after, cls) - _names_with(before, cls), key=lambda n: ids[n])
        lost = sorted(_names_with(before, cls) - _names_with(after, cls), key=lambda n: ids[n])
        if not (_names_with(before, cls) | _names_with(after, cls)):
            assert api.get(_class_url(cls), {"change": "gained"}).status_code in (200, 404)
            continue
        for size in (1, 2, 5):
            assert _pages(api, _class_url(cls), {"change": "gained"}, size) == gained, (cls, size)
            assert _pages(api, _class_url(cls), {"change": "lost"}, size) == lost, (cls, size)


def _class_id(cls: tuple[str, str, str]) -> int:
    return classes.class_known(*cls).id if cls[0] != "info" else _info_class_id(cls)


def _info_class_id(cls: tuple[str, str, str]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM corpora_messageclass WHERE level = 0 AND severity = %s AND category = %s AND what = %s",
            list(cls),
        )
        return cursor.fetchone()[0]


def _problem(response: Any, status: int, field: str | None = None) -> None:
    assert response.status_code == status, response.content
    if field is not None:
        assert field in response.json()["errors"], response.json()


def test_bad_filters_unknown_classes_and_snapshots_without_classes_are_refused_clearly(authed, corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a")
    assert authed.get(f"{PAIR}/classes").json() == []  # fewer than two snapshots: nothing to compare
    classes_write([{UNDEFINED_A}, set(), {MISSING}])
    pair_close()
    classes_write([set(), {UNDEFINED_A}, {MISSING}])
    _snapshot(authed)
    _problem(authed.get(f"{PAIR}/classes?kind=better"), 400, "kind")
    _problem(authed.get(f"{PAIR}/classes?severity=error,loud"), 400, "severity")
    _problem(authed.get(f"{PAIR}/classes?previous=yesterday"), 400, "previous")
    _problem(authed.get(f"{PAIR}/classes?previous=2001-01-01T00:00:00Z"), 404, "previous")
    _problem(authed.get(_class_url(UNDEFINED_A)), 400, "change")
    _problem(authed.get(_class_url(UNDEFINED_A), {"change": "both"}), 400, "change")
    _problem(authed.get(_class_url(NOTE), {"change": "gained"}), 400, "severity")
    _problem(authed.get(_class_url(("error", "undefined", "\\never")), {"change": "gained"}), 404)
    _problem(authed.get("/api/runs/a/nope/classes"), 404)
    assert [row["document"] for row in authed.get(_class_url(UNDEFINED_A), {"change": "gained"}).json()] == ["doc1"]
    assert [row["document"] for row in authed.get(_class_url(UNDEFINED_A), {"change": "lost"}).json()] == ["doc0"]
    # A snapshot taken before snapshots froze classes (as after the migration) cannot be compared by class.
    Snapshot.objects.filter(pk=Snapshot.objects.order_by("taken_at").first().pk).update(with_classes=False)
    _problem(authed.get(f"{PAIR}/classes"), 400, "previous")
    _problem(authed.get(_class_url(UNDEFINED_A), {"change": "lost"}), 400, "previous")
    assert authed.get(f"{PAIR}/diff").status_code == 200  # the status diff does not need them
    # Its history says what it cannot know, not that the document had no class then.
    entries = authed.get("/api/corpus/a/tex_to_html/document/doc1/history").json()["entries"]
    assert [(e["classes_known"], e["classes"]) for e in entries] == [(True, [True]), (False, [False])]


def test_a_rerun_s_retired_messages_are_in_no_snapshot_and_the_history_shows_each_status_and_class(authed, corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a")
    classes_write([{UNDEFINED_A, MISSING}, {MISSING}, set()])
    pair_close()
    first = Snapshot.objects.get()
    assert authed.post("/api/reports/a/tex_to_html/rerun?severity=error").status_code == 202
    # The rerun retired doc0's messages: a snapshot now does not count them, as the reports do not.
    _snapshot(authed)
    retired = Snapshot.objects.order_by("-taken_at").first()
    assert not SnapshotMembers.objects.filter(snapshot_id=retired.pk, message_class_id=_class_id(UNDEFINED_A)).exists()
    live = authed.get("/api/corpus/a/tex_to_html/document/doc0/history").json()
    assert [(e["live"], e["status"]) for e in live["entries"]] == [(True, "todo"), (False, "todo"), (False, "error")]
    assert live["entries"][0]["run"]["open"] and live["entries"][0]["run"]["owner"] == "tester"
    classes_write([{MISSING}, {MISSING}, set()])  # doc0 fixed: only the warning is left
    pair_close()

    history = authed.get("/api/corpus/a/tex_to_html/document/doc0/history").json()
    assert history["document"] == "doc0" and history["report_url"].endswith("/document/doc0")
    assert [(c["severity"], c["category"], c["what"]) for c in history["classes"]] == [UNDEFINED_A, MISSING]
    assert history["classes"][0]["meaning"]  # the taxonomy's meaning of undefined at error
    assert [(e["live"], e["status"], e["classes"]) for e in history["entries"]] == [
        (False, "warning", [False, True]),  # the rerun's run closed: its snapshot
        (False, "todo", [False, False]),  # taken by hand during the rerun, retired messages left out
        (False, "error", [True, True]),  # the first run's snapshot
    ]
    runs = authed.get(PAIR).json()
    assert [e["run"]["id"] for e in history["entries"]] == [runs[0]["id"], runs[0]["id"], runs[1]["id"]]
    assert history["entries"][2]["taken_at"] == first.taken_at.isoformat().replace("+00:00", "Z")
    untouched = authed.get("/api/corpus/a/tex_to_html/document/doc2/history").json()
    assert untouched["classes"] == [] and [e["status"] for e in untouched["entries"]] == ["no_problem"] * 3
    _problem(authed.get("/api/corpus/a/tex_to_html/document/nope/history"), 404)
    _problem(authed.get("/api/corpus/a/nope/document/doc0/history"), 404)


def test_pruning_and_deleting_history_remove_the_snapshots_classes(authed, corpus_root):
    imported(corpus_root, "a", documents=2)
    activated("a")
    classes_write([{UNDEFINED_A}, {MISSING}])
    pair_close()
    classes_write([{UNDEFINED_B}, {MISSING}])
    _snapshot(authed)
    old = Snapshot.objects.order_by("taken_at").first()
    assert SnapshotMembers.objects.filter(snapshot_id=old.pk).count() == 2
    assert SnapshotClass.objects.filter(snapshot_id=old.pk).count() == 2
    summary = history_prune(before=Snapshot.objects.order_by("-taken_at").first().taken_at, actor="tester")
    assert summary.total.snapshots == 1 and summary.total.bytes > 0
    assert not SnapshotMembers.objects.filter(snapshot_id=old.pk).exists()
    assert not SnapshotClass.objects.filter(snapshot_id=old.pk).exists()
    assert SnapshotMembers.objects.exists()
    assert authed.delete("/api/corpora/a?confirm=a").status_code == 204
    assert not SnapshotMembers.objects.exists() and not SnapshotClass.objects.exists()


def test_rerun_keeps_each_snapshot_s_classes_as_they_were(authed, corpus_root):
    """A rerun changes tasks and messages, never what an earlier snapshot froze."""
    imported(corpus_root, "a", documents=2)
    activated("a")
    classes_write([{UNDEFINED_A}, set()])
    pair_close()
    snapshot = Snapshot.objects.get()
    frozen = list(
        SnapshotMembers.objects.filter(snapshot_id=snapshot.pk).values_list("message_class_id", "document_ids")
    )
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester")
    classes_write([set(), {UNDEFINED_A}])
    pair_close()
    again = list(
        SnapshotMembers.objects.filter(snapshot_id=snapshot.pk).values_list("message_class_id", "document_ids")
    )
    assert again == frozen


def test_a_snapshot_s_status_arrays_are_stored_uncompressed_and_read_back_whole(corpus_root):
    """corpora migration 0011: the arrays go out of line without compression (STORAGE EXTERNAL), and read
    back as written."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, attstorage FROM pg_attribute WHERE attrelid = 'corpora_snapshot'::regclass"
            " AND attname IN ('document_ids', 'statuses') ORDER BY attname"
        )
        assert cursor.fetchall() == [("document_ids", "e"), ("statuses", "e")]
    imported(corpus_root, "a", documents=400)  # 3,200 bytes of ids: past the size that sends them out of line
    activated("a")
    tasks = pair_tasks()
    taken = pairs.snapshot_take(corpus_id=tasks[0].corpus_id, service_id=tasks[0].service_id)
    snapshot = Snapshot.objects.get(pk=taken.snapshot_id)
    assert snapshot.document_ids == [task.document_id for task in tasks]
    assert snapshot.statuses == [0] * 400
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_size(document_ids) FROM corpora_snapshot WHERE id = %s", [taken.snapshot_id])
        assert cursor.fetchone()[0] >= 8 * 400  # as written: ascending ids would compress


WORKER_DIED = ("fatal", "infrastructure", "worker_died")
NEVER_COMPLETED = ("fatal", "cortex", "never_completed_with_retries")  # CorTeX's own name for one


def test_the_class_diff_its_screen_and_the_overview_leave_out_or_count_apart_infrastructure_failures(
    authed, admin_client, corpus_root
):
    """Two tasks became infrastructure failures (the class and CorTeX's own), one a converter fatal: the
    diff lists all three, leaves the first two out on request (API and screen), the run page's new
    failures never show them, and the report overview counts them apart."""
    from corpora.queries.corpora import pair_resolve
    from corpora.queries.reports import service_overview
    from reports.serializers import ServiceOverviewSerializer

    imported(corpus_root, "a", documents=4)
    activated("a")
    classes_write([{UNDEFINED_A}, {UNDEFINED_A}, set(), set()])
    pair_close()
    classes_write([{WORKER_DIED}, {NEVER_COMPLETED}, {IO_FATAL}, set()])
    _snapshot(authed)
    listed = {(c["severity"], c["category"], c["what"]) for c in authed.get(f"{PAIR}/classes?severity=fatal").json()}
    assert listed == {WORKER_DIED, NEVER_COMPLETED, IO_FATAL}
    without = authed.get(f"{PAIR}/classes", {"severity": "fatal", "exclude_infrastructure": "true"}).json()
    assert [(c["severity"], c["category"], c["what"]) for c in without] == [IO_FATAL]
    screen = admin_client.get("/runs/a/tex_to_html/classes", {"exclude_infrastructure": "true"})
    assert screen.status_code == 200
    body = screen.content.decode()
    assert 'data-class="fatal:I/O:a/b.tex"' in body and "infrastructure" not in body.split('id="class-changes"')[1]
    assert 'name="exclude_infrastructure" value="true" checked' in body
    everything = admin_client.get("/runs/a/tex_to_html/classes").content.decode()
    assert 'data-class="fatal:infrastructure:worker_died"' in everything
    overview = ServiceOverviewSerializer(service_overview(pair_resolve("a", "tex_to_html"))).data
    assert (overview["counts"]["fatal"], overview["infrastructure_fatal"]) == (3, 2)
    assert authed.get("/api/reports/a/tex_to_html").json()["infrastructure_fatal"] == 2
