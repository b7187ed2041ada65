"""Reads of the message classes that snapshots froze (corpora.models.SnapshotClass, SnapshotMembers): which
classes appeared, vanished, grew or shrank between two snapshots of a pair, the documents that gained or
lost one class, and a document's history over every snapshot of its pair."""

# ruff: noqa: S608  (statements are fixed text and constants; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from config.api.paging import Page
from config.errors import BadRequest, NotFound
from conversion.choices import SEVERITIES_WORST_FIRST, Severity
from conversion.taxonomy import meaning_of
from corpora.choices import ClassChange, ClassLevel, MemberChange
from corpora.models import Document, Run, Snapshot, Task
from corpora.pairs import MEMBER_SEVERITIES
from corpora.queries.corpora import Pair
from corpora.queries.diffs import DiffScope
from corpora.queries.history import pair_known
from corpora.statuses import DIFF_BUCKET_NAMES, infrastructure_class_sql, status_name
from corpora.tables import (
    MESSAGE_CLASS_TABLE,
    SNAPSHOT_CLASS_TABLE,
    SNAPSHOT_MEMBERS_TABLE,
    SNAPSHOT_TABLE,
    STALE_MESSAGES_TABLE,
    TASK_CLASS_TABLE,
)

# What each kind is, on the two snapshots' task counts p (previous) and c (current).
_KIND_SQL: dict[str, str] = {
    ClassChange.APPEARED: "p = 0 AND c > 0",
    ClassChange.VANISHED: "p > 0 AND c = 0",
    ClassChange.GREW: "p > 0 AND c > p",
    ClassChange.SHRANK: "c > 0 AND c < p",
    ClassChange.INCREASED: "c > p",
    ClassChange.DECREASED: "c < p",
}
_SEVERITY_VALUES: tuple[str, ...] = tuple(severity.value for severity in Severity)
_SEVERITY_RANK = (
    "CASE k.severity "
    + " ".join(f"WHEN '{severity}' THEN {rank}" for rank, severity in enumerate(SEVERITIES_WORST_FIRST))
    + " END"
)


def _classes_check(scope: DiffScope) -> tuple[int, int] | None:
    """The two snapshots' ids, None when the pair has fewer than two; 400 when either was taken before
    snapshots froze message classes."""
    if scope.previous is None or scope.current is None:
        return None
    ids = (scope.previous.id, scope.current.id)
    without = list(Snapshot.objects.filter(pk__in=ids, with_classes=False).values_list("taken_at", flat=True))
    if without:
        dates = ", ".join(sorted(date.isoformat() for date in without))
        raise BadRequest(
            f"The snapshot taken at {dates} holds no message classes: it was taken before snapshots recorded "
            "them. Compare snapshots taken since (available_dates of the diff).",
            errors={"previous" if scope.previous.taken_at in without else "current": ["no message classes"]},
        )
    return ids


def severities_check(value: str | None) -> list[str]:
    """A `severity` filter of the class diff: message severities separated by commas (empty: all)."""
    if value in (None, ""):
        return list(_SEVERITY_VALUES)
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in _SEVERITY_VALUES]
    if unknown or not chosen:
        raise BadRequest(
            f"Unknown severity {', '.join(unknown) or value!r}; use one or more of {', '.join(Severity)}, "
            "separated by commas.",
            errors={"severity": ["unknown"]},
        )
    return chosen


def _diff_where(kind: str | None, severities: list[str], exclude_infrastructure: bool) -> tuple[str, list[Any]]:
    if kind is not None and kind not in ClassChange.values:
        raise BadRequest(
            f"Unknown kind {kind!r}; use one of {', '.join(ClassChange.values)}.", errors={"kind": ["unknown"]}
        )
    where = (f"({_KIND_SQL[kind]})" if kind else "p <> c") + " AND k.severity = ANY(%s)"
    if exclude_infrastructure:
        where += f" AND NOT {infrastructure_class_sql('k')}"
    return where, [severities]


_PAIRED = (
    "(SELECT coalesce(a.message_class_id, b.message_class_id) AS class_id,"
    "  coalesce(a.tasks, 0) AS p, coalesce(b.tasks, 0) AS c,"
    "  coalesce(a.messages, 0) AS pm, coalesce(b.messages, 0) AS cm"
    f" FROM (SELECT * FROM {SNAPSHOT_CLASS_TABLE} WHERE snapshot_id = %s) a"
    f" FULL JOIN (SELECT * FROM {SNAPSHOT_CLASS_TABLE} WHERE snapshot_id = %s) b"
    f" ON b.message_class_id = a.message_class_id) x JOIN {MESSAGE_CLASS_TABLE} k ON k.id = x.class_id"
)


def _kind(p: int, c: int) -> str:
    return (
        ClassChange.APPEARED
        if p == 0
        else ClassChange.VANISHED
        if c == 0
        else ClassChange.GREW
        if c > p
        else ClassChange.SHRANK
    )


def class_diff(
    scope: DiffScope,
    page: Page,
    *,
    kind: str | None = None,
    severity: str | None = None,
    exclude_infrastructure: bool = False,
) -> list[ClassDiffRow]:
    """GET /api/runs/{corpus}/{service}/classes: the message classes whose task count changed between the
    two snapshots, the largest change first, optionally of one kind and of some severities, and without
    the infrastructure failures' classes (corpora.statuses.infrastructure_class_sql)."""
    where, params = _diff_where(kind, severities_check(severity), exclude_infrastructure)
    ids = _classes_check(scope)
    if ids is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT k.severity, k.category, k.what, p, c, pm, cm FROM {_PAIRED} WHERE {where}"
            f" ORDER BY abs(c - p) DESC, {_SEVERITY_RANK}, k.category, k.what OFFSET %s LIMIT %s",
            [*ids, *params, page.offset, page.page_size],
        )
        rows = cursor.fetchall()
    corpus, service = scope.pair.corpus_name, scope.pair.service_name
    return [_class_change(corpus, service, *row) for row in rows]


def class_diff_count(
    scope: DiffScope, *, kind: str | None = None, severity: str | None = None, exclude_infrastructure: bool = False
) -> int:
    """How many classes class_diff lists under the same filters (for the screen's pager)."""
    where, params = _diff_where(kind, severities_check(severity), exclude_infrastructure)
    ids = _classes_check(scope)
    if ids is None:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {_PAIRED} WHERE {where}", [*ids, *params])
        return int(cursor.fetchone()[0])


@dataclass(frozen=True)
class ClassDiffRow:
    """A message class whose task count changed between two snapshots (ClassChangeSerializer)."""

    severity: str
    category: str
    what: str
    meaning: str | None
    kind: str
    previous_tasks: int
    current_tasks: int
    change: int
    previous_messages: int
    current_messages: int
    documents_listed: bool


def _class_change(
    corpus: str, service: str, severity: str, category: str, what: str, p: int, c: int, pm: int, cm: int
) -> ClassDiffRow:
    meaning = meaning_of(severity, category)
    return ClassDiffRow(
        severity=severity,
        category=category,
        what=what,
        meaning=meaning.meaning if meaning else None,
        kind=_kind(p, c),
        previous_tasks=p,
        current_tasks=c,
        change=c - p,
        previous_messages=pm,
        current_messages=cm,
        documents_listed=severity in MEMBER_SEVERITIES,
    )


@dataclass(frozen=True)
class ClassRef:
    id: int
    severity: str
    category: str
    what: str


def class_known(severity: str, category: str, what: str) -> ClassRef:
    """A message class of warning severity or worse by its names (404 when no message ever had it)."""
    if severity not in MEMBER_SEVERITIES:
        raise BadRequest(
            f"Snapshots list the documents of {', '.join(MEMBER_SEVERITIES)} classes only, not of {severity!r}.",
            errors={"severity": ["not listed"]},
        )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {MESSAGE_CLASS_TABLE} WHERE level = {ClassLevel.CLASS} AND severity = %s"
            " AND category = %s AND what = %s",
            [severity, category, what],
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound(f"No message class {severity}:{category}:{what} was ever recorded.")
    return ClassRef(row[0], severity, category, what)


def class_split(severity: str, rest: str) -> tuple[str, str]:
    """Category and what of a class of `severity` in a URL (`{category}/{what}`), each of which may hold
    '/' (LaTeXML's `I/O` category, file names as whats): the first split that names a recorded class,
    else the first."""
    if "/" not in rest:
        raise NotFound("A class is named by its category and its what: .../{category}/{what}/tasks.")
    positions = [index for index, char in enumerate(rest) if char == "/"]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT category, what FROM {MESSAGE_CLASS_TABLE} WHERE level = {ClassLevel.CLASS} AND severity = %s"
            " AND (category, what) IN"
            " (SELECT left(%s, p - 1), substr(%s, p + 1) FROM unnest(%s::int[]) AS p) ORDER BY length(category)",
            [severity, rest, rest, [index + 1 for index in positions]],
        )
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (rest[: positions[0]], rest[positions[0] + 1 :])


# A page walks the chunks of one class in order and stops when it is full: the planner must keep their
# order (an incremental sort within each chunk) rather than compare every chunk and sort the whole class.
_CHUNK_PAGE_SETTINGS = ("SET LOCAL enable_sort = off", "SET LOCAL jit = off")


@dataclass(frozen=True)
class ClassTask:
    """A document of a pair that gained or lost a class between two snapshots (ClassTaskSerializer, which
    links it)."""

    corpus: str
    service: str
    document: str
    change: str


def class_tasks(scope: DiffScope, cls: ClassRef, change: str, page: Page) -> list[ClassTask]:
    """GET /api/runs/{corpus}/{service}/classes/{severity}/{category}/{what}/tasks: the documents that
    gained (had it only in the current snapshot) or lost (only in the previous) the class, in document
    order. The class's chunks in one snapshot are walked in order: a chunk equal in the other is passed
    over, the others are compared with the other's documents in their range until the page is full."""
    if change not in MemberChange.values:
        raise BadRequest(f"Unknown change {change!r}; use gained or lost.", errors={"change": ["unknown"]})
    ids = _classes_check(scope)
    if ids is None:
        return []
    mine, other = (ids[1], ids[0]) if change == MemberChange.GAINED else ids
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in _CHUNK_PAGE_SETTINGS:
            cursor.execute(statement)
        cursor.execute(
            f"SELECT x.document_id FROM {SNAPSHOT_MEMBERS_TABLE} a,"
            # The other snapshot's documents in the chunk's range: from its chunk that starts at or before
            # the range (if any) to the last that starts in it.
            " LATERAL (SELECT u.d AS document_id FROM unnest(a.document_ids) AS u(d) EXCEPT"
            f"  SELECT v.d FROM {SNAPSHOT_MEMBERS_TABLE} o, unnest(o.document_ids) AS v(d)"
            "  WHERE o.snapshot_id = %(other)s AND o.message_class_id = a.message_class_id AND o.lo <= a.hi"
            f"   AND o.lo >= coalesce((SELECT max(b.lo) FROM {SNAPSHOT_MEMBERS_TABLE} b WHERE b.snapshot_id = %(other)s"
            "    AND b.message_class_id = a.message_class_id AND b.lo <= a.lo), a.lo)"
            "   AND v.d BETWEEN a.lo AND a.hi ORDER BY 1) x"
            " WHERE a.snapshot_id = %(mine)s AND a.message_class_id = %(class)s"
            # A chunk equal in both snapshots gained and lost nothing.
            f" AND NOT EXISTS (SELECT FROM {SNAPSHOT_MEMBERS_TABLE} e WHERE e.snapshot_id = %(other)s"
            "  AND e.message_class_id = a.message_class_id AND e.lo = a.lo AND e.document_ids = a.document_ids)"
            " ORDER BY a.lo, x.document_id OFFSET %(offset)s LIMIT %(limit)s",
            {"mine": mine, "other": other, "class": cls.id, "offset": page.offset, "limit": page.page_size},
        )
        document_ids = [row[0] for row in cursor.fetchall()]
    names = dict(Document.objects.filter(pk__in=document_ids).values_list("pk", "name"))
    corpus, service = scope.pair.corpus_name, scope.pair.service_name
    return [
        ClassTask(corpus=corpus, service=service, document=names[document_id], change=change)
        for document_id in document_ids
    ]


# --- a document's history --------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryClass:
    """A class of warning severity or worse that a document had in a snapshot (HistoryClassSerializer)."""

    severity: str
    category: str
    what: str
    meaning: str | None


@dataclass(frozen=True)
class HistoryRun:
    id: int
    owner: str
    started_at: datetime
    finished_at: datetime | None
    open: bool


@dataclass(frozen=True)
class HistoryEntry:
    """A document in one snapshot, or now (HistoryEntrySerializer): for each of the history's classes,
    whether it had it then."""

    taken_at: datetime | None
    live: bool
    run: HistoryRun | None
    status: str
    classes_known: bool
    classes: list[bool]


@dataclass(frozen=True)
class DocumentHistory:
    """A document's status and classes over every snapshot of its pair, newest first
    (DocumentHistorySerializer)."""

    corpus: str
    service: str
    document: str
    classes: list[HistoryClass]
    entries: list[HistoryEntry]


def document_history(pair: Pair, document_name: str) -> DocumentHistory:
    """GET /api/corpus/{corpus}/{service}/document/{name}/history: newest first, the document now (while a
    run of the pair is open) and in every snapshot of its pair that holds it: the date, the run and its
    owner, its status then, and for each class of warning severity or worse that it had in any of them,
    whether it had it then (unknown in a snapshot taken before snapshots froze classes)."""
    pair_known(pair)
    document = Document.objects.filter(corpus_id=pair.corpus_id, name=document_name).first()
    task = Task.objects.filter(document=document, service_id=pair.service_id).first() if document else None
    if document is None or (task is None and not _in_any_snapshot(pair, document.pk)):
        raise NotFound(f"No document {document_name!r} for {pair.service_name} in {pair.corpus_name}.")
    runs = list(
        Run.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id)
        .order_by("-started_at")
        .values("id", "owner", "started_at", "finished_at", "snapshot_id")
    )
    entries: list[dict[str, Any]] = []
    memberships: dict[Any, set[int]] = {}
    open_run = next((run for run in runs if run["finished_at"] is None), None)
    if open_run is not None and task is not None:
        status = status_name(task.status)
        entries.append({"key": "now", "taken_at": None, "live": True, "run": open_run, "status": status, "known": True})
        memberships["now"] = _classes_now(task.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.id, s.taken_at, s.statuses[array_position(s.document_ids, %s)], s.with_classes"
            f" FROM {SNAPSHOT_TABLE} s WHERE s.corpus_id = %s AND s.service_id = %s AND %s = ANY(s.document_ids)"
            " ORDER BY s.taken_at DESC",
            [document.pk, pair.corpus_id, pair.service_id, document.pk],
        )
        snapshots = cursor.fetchall()
        cursor.execute(
            f"SELECT m.snapshot_id, m.message_class_id FROM {SNAPSHOT_MEMBERS_TABLE} m"
            " WHERE m.snapshot_id = ANY(%s) AND m.hi >= %s AND m.lo <= %s AND %s = ANY(m.document_ids)",
            [[row[0] for row in snapshots if row[3]], document.pk, document.pk, document.pk],
        )
        for snapshot_id, class_id in cursor.fetchall():
            memberships.setdefault(snapshot_id, set()).add(class_id)
    for snapshot_id, taken_at, bucket, with_classes in snapshots:
        run = next((r for r in runs if r["snapshot_id"] == snapshot_id), None) or next(
            (r for r in runs if r["started_at"] <= taken_at and (r["finished_at"] or taken_at) >= taken_at), None
        )
        status = DIFF_BUCKET_NAMES[bucket]
        entries.append(
            {
                "key": snapshot_id,
                "taken_at": taken_at,
                "live": False,
                "run": run,
                "status": status,
                "known": with_classes,
            }
        )
    classes = _classes_named(set().union(*memberships.values()) if memberships else set())
    return DocumentHistory(
        corpus=pair.corpus_name,
        service=pair.service_name,
        document=document.name,
        classes=[HistoryClass(c["severity"], c["category"], c["what"], c["meaning"]) for c in classes],
        entries=[
            HistoryEntry(
                taken_at=entry["taken_at"],
                live=entry["live"],
                run=_run_brief(entry["run"]),
                status=entry["status"],
                classes_known=entry["known"],
                classes=[c["id"] in memberships.get(entry["key"], set()) for c in classes],
            )
            for entry in entries
        ],
    )


def _in_any_snapshot(pair: Pair, document_id: int) -> bool:
    return Snapshot.objects.filter(
        corpus_id=pair.corpus_id, service_id=pair.service_id, document_ids__contains=[document_id]
    ).exists()


def _classes_now(task_id: int) -> set[int]:
    """The classes of warning severity or worse that the task's messages have now (retired ones aside)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.message_class_id FROM {TASK_CLASS_TABLE} p"
            f" JOIN {MESSAGE_CLASS_TABLE} k ON k.id = p.message_class_id WHERE p.task_id = %s AND k.severity = ANY(%s)"
            f" AND NOT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = p.task_id)",
            [task_id, list(MEMBER_SEVERITIES)],
        )
        return {row[0] for row in cursor.fetchall()}


def _classes_named(ids: set[int]) -> list[dict[str, Any]]:
    """The classes of `ids`, worst severity first, then by category and what."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT k.id, k.severity, k.category, k.what FROM {MESSAGE_CLASS_TABLE} k WHERE k.id = ANY(%s)"
            f" ORDER BY {_SEVERITY_RANK}, k.category, k.what",
            [list(ids)],
        )
        rows = cursor.fetchall()
    result = []
    for class_id, severity, category, what in rows:
        meaning = meaning_of(severity, category)
        result.append(
            {"id": class_id, "severity": severity, "category": category, "what": what,
             "meaning": meaning.meaning if meaning else None}
        )  # fmt: skip
    return result


def _run_brief(run: dict[str, Any] | None) -> HistoryRun | None:
    if run is None:
        return None
    return HistoryRun(run["id"], run["owner"], run["started_at"], run["finished_at"], run["finished_at"] is None)
