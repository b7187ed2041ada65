"""Reads of reports: overview, severity > category > what > entries, document, runtimes.

Category and what pages read the grain rollup. Building a missing slice is a write
(corpora.actions.reports.slice_ensure): corpora.actions.reports.category_report_read and what_report_read, which both
twins call, ensure the slice first and tell these reads whether it is still being computed.
"""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

import itertools
import logging
import math
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet

from config.api.paging import Page
from config.errors import BadRequest, NotFound
from conversion.choices import COMPLETED_NAMES, SEVERITIES_WORST_FIRST, Category, Severity, TaskStatus
from conversion.source_context import SourceContext, location_of, source_contexts
from conversion.taxonomy import meaning_of
from corpora.choices import ClassLevel
from corpora.models import RUNTIME_BIN_MS, Document, LogMessage, MessageClass, ReportGrain, Run, Task, TaskRuntime
from corpora.queries.corpora import Pair, pair_counts, retired_messages_exist
from corpora.results import result_html, result_stored
from corpora.statuses import SEVERITIES, STATUS_KEYS, infrastructure_class_sql, severity_check, status_name
from corpora.tables import (
    CORPUS_TABLE,
    DOCUMENT_TABLE,
    MESSAGE_CLASS_TABLE,
    MESSAGE_TALLY_TABLE,
    RUNTIME_BIN_TABLE,
    RUNTIME_COUNT_TABLE,
    STALE_MESSAGES_TABLE,
    TASK_CLASS_TABLE,
    TASK_MESSAGES_TABLE,
    TASK_RUNTIME_TABLE,
    TASK_TABLE,
)
from services.queries import service_get

logger = logging.getLogger(__name__)


# Fixed histogram buckets of the runtime report (upper bounds in ms; the last is open).
RUNTIME_BUCKETS_MS = [100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 120_000, 300_000]


# --- overview --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceOverview:
    """A pair's overview (ServiceOverviewSerializer)."""

    corpus: str
    service: str
    total: int
    counts: dict[str, int]
    percentages: dict[str, float]
    run_in_progress: bool
    severities: list[str]
    # Fatal tasks the machine ended, not the converter (docs/decisions/infrastructure-failures.md): part of
    # counts["fatal"], which less this is the converter's fatals.
    infrastructure_fatal: int = 0


def infrastructure_fatal_count(pair: Pair) -> int:
    """How many fatal tasks of the pair are infrastructure failures: a sum of the tally rows of the
    (fatal, infrastructure) rollup and of CorTeX's own class for it, one index probe each."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(sum(t.tasks), 0) FROM {MESSAGE_TALLY_TABLE} t"
            f" JOIN {MESSAGE_CLASS_TABLE} k ON k.id = t.message_class_id"
            f" WHERE t.corpus_id = %s AND t.service_id = %s AND t.task_status = {TaskStatus.FATAL}"
            f" AND k.level IN ({ClassLevel.CLASS}, {ClassLevel.CATEGORY}) AND {infrastructure_class_sql('k')}"
            # the rollup counts the tasks of every infrastructure class once; CorTeX's class is a class
            f" AND (k.level = {ClassLevel.CATEGORY} OR k.category <> '{Category.INFRASTRUCTURE}')",
            [pair.corpus_id, pair.service_id],
        )
        return int(cursor.fetchone()[0])


def service_overview(pair: Pair) -> ServiceOverview:
    """Total and per-status counts with percentages; invalid tasks are left out of the denominator. The
    fatal tasks that are infrastructure failures are counted apart too."""
    counts = pair_counts(pair.corpus_id, pair.service_id)
    denominator = counts["total"] - counts["invalid"]
    percentages = {
        key: (round(100.0 * counts[key] / denominator, 2) if denominator else 0.0)
        for key in STATUS_KEYS
        if key != "invalid"
    }
    run_in_progress = Run.objects.filter(
        corpus_id=pair.corpus_id, service_id=pair.service_id, finished_at__isnull=True
    ).exists()
    return ServiceOverview(
        corpus=pair.corpus_name, service=pair.service_name, total=counts["total"], counts=counts,
        percentages=percentages, run_in_progress=run_in_progress, severities=list(SEVERITIES),
        infrastructure_fatal=infrastructure_fatal_count(pair) if counts["fatal"] else 0,
    )  # fmt: skip


# --- grains ----------------------------------------------------------------------------------------


# For one bulk transaction (a slice build, a rerun; measured on 1M tasks / 10M messages,
# bench/README.md): sorts and hashes stay in memory (the server default of 4 MB sent them to disk), and
# JIT compilation (about 1 s) buys nothing.
# An entry list merges its statuses' ranges (each in task order) instead of hashing or sorting them: the
# planner, which cannot estimate one what's share of a status, would otherwise sort 400,000 task ids to
# show 100 of them.
_ENTRY_LIST_SETTINGS = (
    "SET LOCAL enable_hashagg = off",
    "SET LOCAL enable_sort = off",
    "SET LOCAL max_parallel_workers_per_gather = 0",
)


def _meaning_fields(message_severity: str, category: str) -> dict[str, str | None]:
    """A category's meaning at a message severity and what its whats name (conversion.taxonomy); nulls
    for a category the taxonomy does not name, and for info messages."""
    meaning = meaning_of(message_severity, category)
    return {"meaning": meaning.meaning if meaning else None, "what_names": meaning.what if meaning else None}


def _tasks_of_severity(pair: Pair, severity: str) -> int:
    statuses, _ = SEVERITIES[severity]
    counts = pair_counts(pair.corpus_id, pair.service_id)
    return sum(counts[COMPLETED_NAMES[s]] for s in statuses)


@dataclass(frozen=True)
class GrainRow:
    """A row of a category report (with its category's meaning) or of a what report (ReportRowSerializer)."""

    name: str
    tasks: int
    messages: int
    task_percent: float
    message_percent: float
    meaning: str | None = None
    what_names: str | None = None


@dataclass(frozen=True)
class GrainReport:
    """A category report, or with `category` a what report with that category's meaning
    (GrainReportSerializer, which leaves `category` out of a category report)."""

    corpus: str
    service: str
    severity: str
    offset: int
    page_size: int
    computing: bool
    count: int
    rows: list[GrainRow]
    tasks: int
    messages: int
    tasks_without_messages: int | None
    category: str | None = None
    meaning: str | None = None
    what_names: str | None = None


def _grain_report(pair: Pair, severity: str, page: Page, *, category: str | None, computing: bool) -> GrainReport:
    _, message_severity = severity_check(severity)
    base: dict[str, Any] = {"corpus": pair.corpus_name, "service": pair.service_name, "severity": severity,
                            "offset": page.offset, "page_size": page.page_size}  # fmt: skip
    if category is not None:
        base.update({"category": category, **_meaning_fields(message_severity, category)})
    if computing:
        return GrainReport(**base, computing=True, count=0, rows=[], tasks=0, messages=0, tasks_without_messages=None)
    grains = ReportGrain.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id, severity=severity)
    total = grains.filter(category__isnull=True, what__isnull=True).first()
    if category is None:
        scope_tasks = _tasks_of_severity(pair, severity)
        scope_messages = total.message_count if total else 0
        rows_qs = grains.filter(category__isnull=False, what__isnull=True)
        name_field = "category"
    else:
        parent = grains.filter(category=category, what__isnull=True).first()
        if parent is None:
            raise NotFound(
                f"No {severity} messages of category {category!r} for {pair.service_name} on {pair.corpus_name}."
            )
        scope_tasks, scope_messages = parent.task_count, parent.message_count
        rows_qs = grains.filter(category=category, what__isnull=False)
        name_field = "what"
    count = rows_qs.count()
    rows = []
    for grain in rows_qs.order_by("-task_count", name_field)[page.offset : page.offset + page.page_size]:
        name = getattr(grain, name_field)
        rows.append(
            GrainRow(
                name=name,
                tasks=grain.task_count,
                messages=grain.message_count,
                task_percent=round(100.0 * grain.task_count / scope_tasks, 2) if scope_tasks else 0.0,
                message_percent=round(100.0 * grain.message_count / scope_messages, 2) if scope_messages else 0.0,
                **(_meaning_fields(message_severity, name) if category is None else {}),
            )
        )
    with_messages = total.task_count if total else 0
    return GrainReport(
        **base, computing=False, count=count, rows=rows, tasks=scope_tasks, messages=scope_messages,
        tasks_without_messages=max(scope_tasks - with_messages, 0) if category is None else None,
    )  # fmt: skip


def category_report(pair: Pair, severity: str, page: Page, *, computing: bool = False) -> GrainReport:
    """One row per category, by task count; plus the tasks of that status with no such message. With
    `computing` (the slice is being built in the background) the report says so and has no rows."""
    return _grain_report(pair, severity, page, category=None, computing=computing)


def what_report(pair: Pair, severity: str, category: str, page: Page, *, computing: bool = False) -> GrainReport:
    """One row per what within a category, by task count (`computing` as in category_report)."""
    return _grain_report(pair, severity, page, category=category, computing=computing)


@dataclass(frozen=True)
class Entry:
    """A document of an entry list, with the details of its first message of the class (EntrySerializer)."""

    document: str
    status: str
    details: str


@dataclass(frozen=True)
class EntryList:
    """A page of the documents with one (severity, category, what) (EntryListSerializer)."""

    corpus: str
    service: str
    severity: str
    category: str
    what: str
    offset: int
    page_size: int
    entries: list[Entry]


def entry_list(pair: Pair, severity: str, category: str, what: str, page: Page) -> EntryList:
    """The documents with a message (severity, category, what), in task order, paginated.

    The (task, class) rows carry their task's status and their key leads with it, so the tasks of one
    status with that class are one range of the key, in task order, read without a look at any other
    table however deep the offset. The info severity takes every completed status: one range per
    status, merged in task order. Only the page's own rows then fetch a document name and the details of
    their first message of the class (from the task's row of messages)."""
    statuses, message_severity = severity_check(severity)
    class_id = message_class_id(message_severity, category, what)
    task_ids: list[int] = []
    if class_id is not None:
        # Rows of messages a rerun retired stay under the key until the purge: left out meanwhile.
        retired = (
            f" AND NOT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = p.task_id)"
            if retired_messages_exist(pair.corpus_id, pair.service_id)
            else ""
        )
        ranges = " UNION ALL ".join(
            [f"(SELECT p.task_id FROM {TASK_CLASS_TABLE} p WHERE p.corpus_id = %s AND p.service_id = %s"
             f" AND p.task_status = %s AND p.message_class_id = %s{retired} ORDER BY p.task_id)"] * len(statuses)
        )  # fmt: skip
        page_sql = f"SELECT r.task_id FROM ({ranges}) r ORDER BY r.task_id OFFSET %s LIMIT %s"
        params = [value for status in statuses for value in (pair.corpus_id, pair.service_id, status, class_id)]
        params += [page.offset, page.page_size]
        with transaction.atomic(), connection.cursor() as cursor:
            for statement in _ENTRY_LIST_SETTINGS:
                cursor.execute(statement)
            cursor.execute(page_sql, params)
            task_ids = [task_id for (task_id,) in cursor.fetchall()]
    # The page's own rows, with the planner's usual settings: a task's first message of the class is the
    # first place in its log order that points at the class.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT d.name, t.status,
                   x.details[array_position(x.sequence, array_position(x.classes, %s))]
              FROM unnest(%s::bigint[]) WITH ORDINALITY AS p(task_id, n)
              JOIN {TASK_TABLE} t ON t.id = p.task_id
              JOIN {DOCUMENT_TABLE} d ON d.id = t.document_id
              LEFT JOIN {TASK_MESSAGES_TABLE} x ON x.task_id = p.task_id
             ORDER BY p.n
            """,
            [class_id, task_ids],
        )
        rows = cursor.fetchall()
    return EntryList(
        corpus=pair.corpus_name, service=pair.service_name, severity=severity, category=category, what=what,
        offset=page.offset, page_size=page.page_size,
        entries=[Entry(name, status_name(status), (details or "")[:300]) for name, status, details in rows],
    )  # fmt: skip


# --- document --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoggedMessage:
    """A message of a document's log, in log order (MessageSerializer)."""

    severity: str
    category: str
    what: str
    details: str
    # The document's own source around the message's location (conversion.source_context), for at most
    # CONTEXTS_MAX messages of the page; None for the others and where there is none.
    context: SourceContext | None = None


@dataclass(frozen=True)
class DocumentReport:
    """One document's status for a service, its messages and whether it has a stored result and HTML in it
    (DocumentReportSerializer, which links them)."""

    corpus: str
    service: str
    document: str
    entry: str
    explanation: Explanation
    status: str
    attempts: int
    runtime_ms: int | None
    messages: list[LoggedMessage]
    has_result: bool
    has_html: bool


def _document_task(pair: Pair, document_name: str) -> QuerySet[Task]:
    """The task of a pair's document, found by the document's (corpus, name) key: the task's corpus does
    not carry over to the document in the join, and without the document's own corpus the planner scans
    every document of every corpus for the name."""
    return Task.objects.filter(
        corpus_id=pair.corpus_id,
        service_id=pair.service_id,
        document__corpus_id=pair.corpus_id,
        document__name=document_name,
    )


def document_report(pair: Pair, document_name: str, *, contexts: bool = True) -> DocumentReport:
    """One document's status for a service and every log message behind it, and whether it has a stored
    result and converted HTML in it (a fatal conversion may leave only its log).
    With `contexts`, the messages that carry a location get the source lines around it (source_context)."""
    found = _document_task(pair, document_name).select_related("document__corpus").first()
    if found is None:
        raise NotFound(f"No document {document_name!r} for {pair.service_name} in {pair.corpus_name}.")
    task, document = found, found.document
    messages = [
        LoggedMessage(*row)
        for row in LogMessage.objects.filter(task=task)
        .order_by("position")
        .values_list("severity", "category", "what", "details")
    ]
    if contexts:
        messages = _with_source_context(document, messages)
    runtime = TaskRuntime.objects.filter(task=task).values_list("runtime_ms", flat=True).first()
    archive = result_stored(pair.corpus_id, pair.service_id, task.pk)
    has_html = archive is not None and result_html(archive) is not None
    return DocumentReport(
        corpus=pair.corpus_name,
        service=pair.service_name,
        document=document.name,
        entry=document.entry,
        explanation=document_explanation(status_name(task.status), messages),
        status=status_name(task.status),
        attempts=task.attempts,
        runtime_ms=runtime,
        messages=messages,
        has_result=archive is not None,
        has_html=has_html,
    )


# Messages of a document page that get source context: the first ones with a location, worst severity
# first, so that a log of thousands of located warnings costs a page no more than this many windows.
CONTEXTS_MAX = 20
_SEVERITY_RANK = {severity.value: rank for rank, severity in enumerate(SEVERITIES_WORST_FIRST)}


def _with_source_context(document: Document, messages: list[LoggedMessage]) -> list[LoggedMessage]:
    """The messages, the first CONTEXTS_MAX with a location (worst severity first, then in log order) given
    the lines of the document's own source around it, read in one pass over its stored entry."""
    located = [(index, location) for index, m in enumerate(messages) if (location := location_of(m.details))]
    if not located:
        return messages
    located.sort(key=lambda item: (_SEVERITY_RANK.get(messages[item[0]].severity, len(_SEVERITY_RANK)), item[0]))
    chosen = located[:CONTEXTS_MAX]
    found = source_contexts(
        Path(document.corpus.path) / document.entry, document.kind, document.main_file, document.entry,
        [location for _, location in chosen], [Path(root) for root in settings.CORPUS_ROOTS],
    )  # fmt: skip
    with_context = list(messages)
    for (index, _), context in zip(chosen, found, strict=True):
        if context is not None:
            with_context[index] = replace(messages[index], context=context)
    return with_context


# Errors a document's explanation names when it has no fatal message.
EXPLAINED_ERRORS = 3
_NOT_CONVERTED = {"todo": "waits for a worker", "queued": "is with a worker", "blocked": "is paused"}


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class ExplainedMessage:
    """A message that explains a document's status, with its category's meaning (ExplainedMessageSerializer)."""

    severity: str
    category: str
    what: str
    details: str
    meaning: str | None
    what_names: str | None


@dataclass(frozen=True)
class Explanation:
    """A document's conversion in words (ExplanationSerializer)."""

    summary: str
    causes: list[ExplainedMessage]
    missing_files: list[str]


def document_explanation(status: str, messages: list[LoggedMessage]) -> Explanation:
    """A document's conversion in words, as arXiv's banner gives it: a summary of its status, the messages
    that explain it (its fatal messages, or else its first errors) with their meanings, and the files
    and packages it could not load (the whats of its missing_file messages, in log order)."""
    fatal = [m for m in messages if m.severity == Severity.FATAL]
    errors = [m for m in messages if m.severity == Severity.ERROR]
    warnings = sum(1 for m in messages if m.severity == Severity.WARNING)
    causes = [
        ExplainedMessage(m.severity, m.category, m.what, m.details, **_meaning_fields(m.severity, m.category))
        for m in (fatal or errors[:EXPLAINED_ERRORS])
    ]
    missing = list(
        dict.fromkeys(
            m.what for m in messages if m.category.lower() == Category.MISSING_FILE and m.severity != Severity.INFO
        )
    )
    if status in _NOT_CONVERTED:
        summary = f"Not converted: the document {_NOT_CONVERTED[status]}."
    elif status == "no_problem":
        summary = "Converted without problems."
    elif status == "warning":
        summary = f"Converted with {_plural(warnings, 'warning')}."
    elif status == "error":
        summary = f"Converted with {_plural(len(errors), 'error')}: parts of the output may be missing or wrong."
    elif status == "invalid":
        reason = next((m.what for m in fatal if m.category.lower() == "invalid"), "")
        summary = "The input cannot be converted" + (f" ({reason})." if reason else ".")
    else:
        first = causes[0] if causes else None
        summary = "The conversion failed" + (f": {first.meaning}." if first and first.meaning else ".")
    if missing:
        summary += f" It could not load {_plural(len(missing), 'file')}: {', '.join(missing)}."
    return Explanation(summary=summary, causes=causes, missing_files=missing)


# --- messages as data -----------------------------------------------------------------------------

# The columns of every format of the export, in this order.
EXPORT_COLUMNS = ("document", "entry", "status", "severity", "category", "what", "details")
# Task rows a FETCH of the export's cursor reads (150 messages each at arXiv's average).
EXPORT_BATCH_TASKS = 500
# Class labels kept while exporting; past this many the cache starts again (the dictionary is append
# only, so a label read once never changes).
EXPORT_CLASS_CACHE = 100_000
# In the text of each statement, so that pg_stat_activity shows whose it is (the FETCH names the cursor).
EXPORT_MARKER = "/* reports: messages export */"
EXPORT_CURSOR = "messages_export"

# The pair's task rows in task order, retired ones left out as the messages view leaves them out. The
# rows are unfolded here in Python, not by the view: the view subscripts a task's details array once per
# message, which decompresses the whole array each time (quadratic in a task's messages), and its
# ordering by message needs a sort per task. One index scan in task order streams instead.
_EXPORT_SQL = f"""
SELECT {EXPORT_MARKER} d.name, d.entry, x.task_status, x.classes, x.sequence, x.details
  FROM {TASK_MESSAGES_TABLE} x
  JOIN {TASK_TABLE} t ON t.id = x.task_id
  JOIN {DOCUMENT_TABLE} d ON d.id = t.document_id
 WHERE x.corpus_id = %s AND x.service_id = %s{{scope}}
   AND NOT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = x.task_id)
 ORDER BY x.task_id
"""
_EXPORT_LABELS_SQL = (
    f"SELECT {EXPORT_MARKER} id, severity, category, what FROM {MESSAGE_CLASS_TABLE} WHERE id = ANY(%s)"
)
# Stream in task order: without these the planner sorts every task row of the pair (it sorted 1M rows
# before the first came back), and JIT compiles for about a second before the first row.
_EXPORT_SETTINGS = (
    "SET LOCAL enable_sort = off",
    "SET LOCAL max_parallel_workers_per_gather = 0",
    "SET LOCAL jit = off",
)


@dataclass(frozen=True)
class MessagesExport:
    """A checked slice of a pair's messages, read by `batches` when the answer is streamed: every class
    (`severity` None), or the classes of one message severity, optionally of one category and what."""

    corpus: str
    service: str
    severity: str | None
    category: str | None
    what: str | None
    message_severity: str | None
    sql: str
    params: tuple[Any, ...]

    def _wanted(self, labels: tuple[str, str, str]) -> bool:
        severity, category, what = labels
        return (
            (self.message_severity is None or severity == self.message_severity)
            and (self.category is None or category == self.category)
            and (self.what is None or what == self.what)
        )

    def batches(self, tasks: int = EXPORT_BATCH_TASKS) -> Generator[list[ExportTask]]:
        """The slice's messages, up to `tasks` tasks at a time (export_rows unfolds them into rows of
        EXPORT_COLUMNS), in task order and each task's log order. One statement behind a server-side cursor
        in a transaction of its own: PostgreSQL reads the next task rows only when they are fetched, so
        neither side holds more than a few batches. A thread fetches the next batch while the caller
        writes out this one (PostgreSQL and Python then work at once, on two CPUs). Closing the generator
        (a client gone) stops the thread, closes the cursor and rolls the transaction back, which ends the
        query."""
        labels: dict[int, tuple[str, str, str] | None] = {}
        with transaction.atomic(), connection.cursor() as lookup:
            for statement in _EXPORT_SETTINGS:
                lookup.execute(f"{EXPORT_MARKER} {statement}")
            # psycopg's own server-side cursor, for its binary format: arrays load in C from it, faster than
            # from the text format that Django's chunked cursor reads (docs/decisions/exports.md).
            with connection.connection.cursor(name=EXPORT_CURSOR, binary=True) as cursor:
                cursor.execute(self.sql, self.params)
                for fetched in _read_ahead(lambda: cursor.fetchmany(tasks)):
                    missing = {class_id for row in fetched for class_id in row[3] if class_id not in labels}
                    if len(labels) + len(missing) > EXPORT_CLASS_CACHE:
                        labels.clear()
                        missing = {class_id for row in fetched for class_id in row[3]}
                    if missing:
                        lookup.execute(_EXPORT_LABELS_SQL, [list(missing)])
                        for class_id, *label in lookup.fetchall():
                            labels[class_id] = tuple(label) if self._wanted(tuple(label)) else None
                    yield [
                        (name, entry, COMPLETED_NAMES.get(status) or status_name(status),
                         [labels[class_id] for class_id in classes], sequence, details)
                        for name, entry, status, classes, sequence, details in fetched
                    ]  # fmt: skip


# How long the reading thread waits at a time to hand a batch over before it looks whether it should stop.
_HANDOVER_SECONDS = 0.1


def _read_ahead(fetch: Callable[[], list[Any]]) -> Iterator[list[Any]]:
    """fetch()'s batches until an empty one, each fetched by a thread while the previous one is used; at
    most one batch waits. psycopg lets go of the GIL while it waits for the server and serializes the
    connection's use, so the caller's own statements on it wait for a fetch in flight. Closing this
    generator stops the thread before the caller closes the cursor."""
    handover: queue.Queue[list[Any] | BaseException] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                batch: list[Any] | BaseException = fetch()
            except BaseException as exc:  # handed to the caller, who raises it
                batch = exc
            while not stop.is_set():
                try:
                    handover.put(batch, timeout=_HANDOVER_SECONDS)
                    break
                except queue.Full:
                    continue
            if not batch or isinstance(batch, BaseException):
                return

    reader = threading.Thread(target=read, name="messages-export-reader", daemon=True)
    reader.start()
    try:
        while batch := handover.get():
            if isinstance(batch, BaseException):
                raise batch
            yield batch
    finally:
        stop.set()
        reader.join()


# One task's messages as the export reads them: document, entry, status name, the label (severity,
# category, what) of each of the task's classes (None: a class outside the slice), and its log as
# 1-based indexes into those classes beside each message's details.
ExportTask = tuple[str, str, str, list[tuple[str, str, str] | None], list[int], list[str]]


def export_rows(tasks: list[ExportTask]) -> list[tuple[str, ...]]:
    """Tasks' messages as rows of EXPORT_COLUMNS in log order, those of classes outside the slice left out."""
    rows: list[tuple[str, ...]] = []
    for name, entry, status, labels, sequence, details in tasks:
        heads = [(name, entry, status, *label) if label else None for label in labels]
        rows += [(*head, text) for index, text in zip(sequence, details, strict=True) if (head := heads[index - 1])]
    return rows


def messages_export(
    pair: Pair,
    severity: str | None = None,
    category: str | None = None,
    what: str | None = None,
) -> MessagesExport:
    """Every message of a slice: the pair's (every severity, info included), a severity page's (its task
    statuses and message severity, as its report counts them), or one category or (category, what) of
    it. Checked here, so a bad request is refused before any byte of the answer is sent."""  # fmt: skip
    if severity is None and (category is not None or what is not None):
        raise BadRequest("category and what narrow a severity: pass severity too.", errors={"severity": ["required"]})
    if what is not None and category is None:
        raise BadRequest("what narrows a category: pass category too.", errors={"category": ["required"]})
    scope = ""
    params: list[Any] = [pair.corpus_id, pair.service_id]
    message_severity = None
    if severity is not None:
        statuses, message_severity = severity_check(severity)
        # Only task rows with a class of the slice: the dictionary's ids of it, once for the statement.
        classes = f"SELECT c.id FROM {MESSAGE_CLASS_TABLE} c WHERE c.level = %s AND c.severity = %s"
        params += [list(statuses), ClassLevel.CLASS, message_severity]
        for column, value in (("category", category), ("what", what)):
            if value is not None:
                classes += f" AND c.{column} = %s"
                params.append(value)
        scope = f" AND x.task_status = ANY(%s) AND x.classes && ARRAY({classes})"
    return MessagesExport(
        corpus=pair.corpus_name, service=pair.service_name, severity=severity, category=category, what=what,
        message_severity=message_severity, sql=_EXPORT_SQL.format(scope=scope), params=tuple(params),
    )  # fmt: skip


# --- runtimes --------------------------------------------------------------------------------------


def _runtime_bucket_sums() -> str:
    """The histogram's columns over the runtime bins: bucket i sums runtimes in [bounds[i-1], bounds[i]),
    as width_bucket numbers them, in the same pass as count and mean. Each bound is a whole number of
    bins, so each bin falls in one bucket."""
    edges = [int(bound) // RUNTIME_BIN_MS for bound in RUNTIME_BUCKETS_MS]
    conditions = [f"bin < {edges[0]}"]
    conditions += [f"bin >= {low} AND bin < {high}" for low, high in itertools.pairwise(edges)]
    conditions.append(f"bin >= {edges[-1]}")
    return ", ".join(f"coalesce(sum(count) FILTER (WHERE {condition}), 0)::bigint" for condition in conditions)


if any(bound % RUNTIME_BIN_MS for bound in RUNTIME_BUCKETS_MS):
    raise ValueError("every bound of the runtime histogram must be a whole number of runtime bins")
_RUNTIME_BUCKET_SUMS = _runtime_bucket_sums()

# Each percentile's bin is the first whose running count reaches the rank; within it, the first runtime
# (ms) whose running count, added to the bins before, reaches it. A few thousand bins and at most
# RUNTIME_BIN_MS rows of one bin are read, not a row per distinct runtime.
_RUNTIME_PERCENTILES = f"""
WITH bins AS (SELECT bin, count, sum(count) OVER (ORDER BY bin) AS reached
                FROM {RUNTIME_BIN_TABLE} WHERE service_id = %(service)s AND count > 0),
     located AS (SELECT r.place, r.rank, b.bin, b.reached - b.count AS before
                   FROM unnest(%(ranks)s::bigint[]) WITH ORDINALITY AS r(rank, place)
                  CROSS JOIN LATERAL (SELECT bin, count, reached FROM bins WHERE reached >= r.rank
                                       ORDER BY bin LIMIT 1) b)
SELECT (SELECT f.runtime_ms
          FROM (SELECT runtime_ms, sum(count) OVER (ORDER BY runtime_ms) AS reached FROM {RUNTIME_COUNT_TABLE}
                 WHERE service_id = %(service)s AND count > 0 AND runtime_ms >= l.bin * {RUNTIME_BIN_MS}
                   AND runtime_ms < (l.bin + 1) * {RUNTIME_BIN_MS}) f
         WHERE f.reached >= l.rank - l.before ORDER BY f.runtime_ms LIMIT 1)
  FROM located l ORDER BY l.place
"""


@dataclass(frozen=True)
class HistogramBucket:
    """Conversions with a runtime below `lt_ms` (and at least the bucket's before; None: the open last)."""

    lt_ms: int | None
    count: int


@dataclass(frozen=True)
class SlowConversion:
    corpus: str
    document: str
    runtime_ms: int


@dataclass(frozen=True)
class RuntimeReport:
    """A service's runtimes over every corpus (RuntimeReportSerializer)."""

    service: str
    count: int
    mean_ms: float | None
    p50_ms: int | None
    p90_ms: int | None
    p99_ms: int | None
    max_ms: int | None
    histogram: list[HistogramBucket]
    offset: int
    page_size: int
    slowest: list[SlowConversion]


def runtime_report(service_name: str, page: Page) -> RuntimeReport:
    """Distribution, fixed-bucket histogram and the slowest conversions of a service (all corpora).

    Count, mean and histogram are summed from the service's runtime bins, the maximum read from its
    runtime counts (one row per distinct runtime), both kept by triggers. percentile_disc's value at
    rank ceil(p * n) is the first runtime whose running count reaches it, found in its bin. The slowest
    page is found by offset in the index (service, runtime desc, task) before the page's own rows read
    their names."""
    service = service_get(service_name)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(sum(count), 0)::bigint, sum(total_ms)::numeric / nullif(sum(count), 0),"
            f" (SELECT max(runtime_ms) FROM {RUNTIME_COUNT_TABLE} WHERE service_id = %s AND count > 0),"
            f" {_RUNTIME_BUCKET_SUMS} FROM {RUNTIME_BIN_TABLE} WHERE service_id = %s AND count > 0",
            [service.pk, service.pk],
        )
        count, mean, maximum, *per_bucket = cursor.fetchone()
        percentiles = [None, None, None]
        if count:
            ranks = [math.ceil(fraction * count) for fraction in (0.5, 0.9, 0.99)]
            cursor.execute(_RUNTIME_PERCENTILES, {"service": service.pk, "ranks": ranks})
            percentiles = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            f"""
            SELECT c.name, d.name, p.runtime_ms
              FROM (SELECT r.task_id, r.corpus_id, r.runtime_ms FROM {TASK_RUNTIME_TABLE} r
                     WHERE r.service_id = %s ORDER BY r.runtime_ms DESC, r.task_id OFFSET %s LIMIT %s) p
              JOIN {TASK_TABLE} t ON t.id = p.task_id
              JOIN {DOCUMENT_TABLE} d ON d.id = t.document_id
              JOIN {CORPUS_TABLE} c ON c.id = p.corpus_id
             ORDER BY p.runtime_ms DESC, p.task_id
            """,
            [service.pk, page.offset, page.page_size],
        )
        slowest = [SlowConversion(c, d, ms) for c, d, ms in cursor.fetchall()]
    bounds = [*RUNTIME_BUCKETS_MS, None]
    # Bucket i holds runtimes below bounds[i] (and at least bounds[i-1]); the last is open-ended.
    histogram = [HistogramBucket(bound, per_bucket[index]) for index, bound in enumerate(bounds)]
    p50, p90, p99 = percentiles
    return RuntimeReport(
        service=service.name, count=count, mean_ms=round(float(mean), 1) if mean is not None else None,
        p50_ms=p50, p90_ms=p90, p99_ms=p99, max_ms=maximum, histogram=histogram,
        offset=page.offset, page_size=page.page_size, slowest=slowest,
    )  # fmt: skip


def report_path_split(pair: Pair, severity: str, rest: str) -> tuple[str, str | None]:
    """Split what follows the severity in a report URL into (category, what or None).

    Categories and whats may themselves contain '/' (LaTeXML's `I/O` category, file names as whats),
    and a web server decodes %2F before routing, so the split is decided by the data: the whole rest
    when it is a category of the pair, else the first split that names an existing (category, what)."""
    statuses, message_severity = severity_check(severity)

    def exists(level: int, category: str, what: str = "") -> bool:
        """Whether the pair has tasks of these statuses with messages of the class (or category rollup)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT EXISTS (SELECT FROM {MESSAGE_CLASS_TABLE} c JOIN {MESSAGE_TALLY_TABLE} t"
                " ON t.corpus_id = %s AND t.service_id = %s AND t.task_status = ANY(%s) AND t.message_class_id = c.id"
                " WHERE c.level = %s AND c.severity = %s AND c.category = %s AND c.what = %s AND t.tasks > 0)",
                [pair.corpus_id, pair.service_id, list(statuses), level, message_severity, category, what],
            )
            return bool(cursor.fetchone()[0])

    if "/" not in rest or exists(ClassLevel.CATEGORY, rest):
        return rest, None
    positions = [index for index, char in enumerate(rest) if char == "/"]
    for index in positions:
        category, what = rest[:index], rest[index + 1 :]
        if exists(ClassLevel.CLASS, category, what):
            return category, what
    return rest[: positions[0]], rest[positions[0] + 1 :]


def message_class_id(severity: str, category: str, what: str) -> int | None:
    """The dictionary id of a message class (reports.MessageClass), None when no message ever had it."""
    return (
        MessageClass.objects.filter(level=ClassLevel.CLASS, severity=severity, category=category, what=what)
        .values_list("id", flat=True)
        .first()
    )


def document_result_archive(pair: Pair, document_name: str) -> Path:
    """The stored result ZIP of a document's task, or NotFound."""
    task_id = _document_task(pair, document_name).values_list("pk", flat=True).first()
    if task_id is not None:
        path = result_stored(pair.corpus_id, pair.service_id, task_id)
        if path is not None:
            return path
    raise NotFound(f"No stored result of {document_name!r} for {pair.service_name} in {pair.corpus_name}.")


def document_paper(pair: Pair, document_name: str) -> tuple[Path, str]:
    """The stored result of a document and its converted paper's HTML member, or NotFound saying which is
    missing."""
    archive = document_result_archive(pair, document_name)
    member = result_html(archive)
    if member is None:
        raise NotFound(
            f"No HTML: the result of {document_name!r} for {pair.service_name} in {pair.corpus_name} holds none."
        )
    return archive, member


def retired_messages_left() -> int:
    """How many tasks' retired messages the purge has yet to delete (all pairs)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {STALE_MESSAGES_TABLE}")
        return int(cursor.fetchone()[0])


def runtime_p99s(service_ids: list[int]) -> dict[int, int]:
    """The 99th percentile runtime (ms, exact) of each of these services over every corpus, those with at
    least one runtime: read from the runtime bins and counts as `runtime_report` reads them."""
    found = {}
    with connection.cursor() as cursor:
        for service_id in service_ids:
            cursor.execute(
                f"SELECT coalesce(sum(count), 0)::bigint FROM {RUNTIME_BIN_TABLE} WHERE service_id = %s AND count > 0",
                [service_id],
            )
            count = cursor.fetchone()[0]
            if count:
                cursor.execute(_RUNTIME_PERCENTILES, {"service": service_id, "ranks": [math.ceil(0.99 * count)]})
                value = cursor.fetchone()[0]
                if value is not None:
                    found[service_id] = value
    return found
