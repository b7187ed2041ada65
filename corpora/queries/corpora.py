"""Reads of corpora: lists and details with per-service status counts (from the trigger-kept counts), and
a pair's documents with their status."""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet, Sum

from config.api.paging import Page
from config.errors import NotFound
from conversion.choices import Severity, TaskStatus
from corpora.models import Activation, Corpus, Run, Snapshot, TaskCount
from corpora.results import result_has_html
from corpora.statuses import IN_PROGRESS, STATUS_FILTERS, STATUS_KEYS, status_name
from corpora.tables import (
    CORPUS_TABLE,
    DOCUMENT_TABLE,
    MESSAGE_CLASS_TABLE,
    PACKAGE_TALLY_TABLE,
    PACKAGE_USAGE_TABLE,
    SNAPSHOT_DIFF_TABLE,
    STALE_MESSAGES_TABLE,
    TASK_DIFF_TABLE,
    TASK_MESSAGES_TABLE,
    TASK_RUNTIME_TABLE,
    TASK_TABLE,
)
from services.choices import ProtectedService
from services.models import Service
from services.queries import served_service_ids, service_get


def corpus_list() -> QuerySet[Corpus]:
    return Corpus.objects.select_related("parent").order_by("name")


def document_counts() -> dict[int, int]:
    """Documents per corpus id: each document has exactly one import task, counted by the triggers."""
    rows = (
        TaskCount.objects.filter(service__name=ProtectedService.IMPORT)
        .values("corpus_id")
        .annotate(documents=Sum("count"))
        .values_list("corpus_id", "documents")
    )
    return dict(rows)


def corpus_get(name: str) -> Corpus:
    try:
        return Corpus.objects.select_related("parent").get(name=name)
    except Corpus.DoesNotExist as exc:
        raise NotFound(f"No corpus named {name!r}.") from exc


def pair_get(corpus_name: str, service_name: str) -> tuple[Corpus, Service]:
    """The corpus and the service of a pair, by name, as model instances, for the writes that need them
    (activation, deactivation); 404 for either that does not exist. Everything else takes a Pair
    (pair_resolve)."""
    return corpus_get(corpus_name), service_get(service_name)


@dataclass(frozen=True)
class Pair:
    """A (corpus, service) pair that a request names, resolved once (pair_resolve) and handed to every
    query of the request: ids for the statements, names for the DTOs and links."""

    corpus_id: int
    corpus_name: str
    service_id: int
    service_name: str
    # Whether the service ever ran on the corpus: an activation, a run or a snapshot (corpora.queries.history).
    known: bool


def _pair_sql() -> str:
    """The statement of pair_resolve: both names looked up side by side, so a missing one is a NULL row."""
    tables = {model.__name__: model._meta.db_table for model in (Corpus, Service, Activation, Run, Snapshot)}
    either = " OR ".join(
        f"EXISTS (SELECT FROM {tables[name]} x WHERE x.corpus_id = c.id AND x.service_id = s.id)"
        for name in ("Activation", "Run", "Snapshot")
    )
    return (
        f"SELECT c.id, c.name, s.id, s.name, ({either}) FROM (VALUES (%s, %s)) AS p(corpus, service)"
        f" LEFT JOIN {tables['Corpus']} c ON c.name = p.corpus LEFT JOIN {tables['Service']} s ON s.name = p.service"
    )


def pair_resolve(corpus_name: str, service_name: str) -> Pair:
    """The pair a request names, in one statement; 404 for a corpus or a service that does not exist (the
    corpus first, in the words of corpus_get and service_get)."""
    with connection.cursor() as cursor:
        cursor.execute(_pair_sql(), [corpus_name, service_name])
        corpus_id, corpus, service_id, service, known = cursor.fetchone()
    if corpus_id is None:
        raise NotFound(f"No corpus named {corpus_name!r}.")
    if service_id is None:
        raise NotFound(f"No service named {service_name!r}.")
    return Pair(corpus_id, corpus, service_id, service, bool(known))


def status_counts(rows: list[tuple[int, int]]) -> dict[str, Any]:
    """Per-status counts from (bucket, count) rows, with the total and the in-progress count."""
    by_bucket: defaultdict[int, int] = defaultdict(int)
    for bucket, count in rows:
        by_bucket[bucket] += count
    counts: dict[str, Any] = {key: by_bucket.get(bucket, 0) for key, bucket in STATUS_KEYS.items()}
    counts["total"] = sum(by_bucket.values())
    counts[IN_PROGRESS] = counts["todo"] + counts["queued"]
    return counts


@dataclass(frozen=True)
class CorpusService:
    """A service on a corpus (CorpusServiceSerializer): its activation, its per-status counts now
    (status_counts) and whether a live worker serves it."""

    name: str
    protected: bool
    activated_at: datetime | None
    activated_by: str
    counts: dict[str, Any]
    served: bool


def corpus_services(corpus: Corpus) -> list[CorpusService]:
    """The services on a corpus (import first, then activated ones by name) with their status counts."""
    rows = TaskCount.objects.filter(corpus=corpus, count__gt=0).values_list("service_id", "bucket", "count")
    per_service: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for service_id, bucket, count in rows:
        per_service[service_id].append((bucket, count))
    activations = {a.service_id: a for a in Activation.objects.filter(corpus=corpus).select_related("service")}
    services = {s.pk: s for s in Service.objects.filter(pk__in=set(per_service) | set(activations))}
    served = served_service_ids()
    entries = []
    for service in sorted(services.values(), key=lambda s: (s.name not in ProtectedService.values, s.name)):
        activation = activations.get(service.pk)
        entries.append(
            CorpusService(
                name=service.name,
                protected=service.is_protected,
                activated_at=activation.created_at if activation else None,
                activated_by=activation.actor if activation else "",
                counts=status_counts(per_service.get(service.pk, [])),
                served=service.is_protected or service.pk in served,
            )
        )
    return entries


def activated_service_names(corpora: list[Corpus]) -> dict[int, list[str]]:
    """Activated service names per corpus id, in one query for a whole list."""
    names: dict[int, list[str]] = defaultdict(list)
    rows = Activation.objects.filter(corpus__in=corpora).order_by("service__name")
    for corpus_id, service_name in rows.values_list("corpus_id", "service__name"):
        names[corpus_id].append(service_name)
    return names


@dataclass(frozen=True)
class ServiceCounts:
    """An activated service of a listed corpus with its per-status counts now (ServiceCountsSerializer)."""

    name: str
    counts: dict[str, Any]


def activated_service_counts(corpora: list[Corpus], names: dict[int, list[str]]) -> dict[int, list[ServiceCounts]]:
    """Per corpus id, each of its activated services (`names`, activated_service_names) with its per-status
    counts now, from the trigger-kept counts: one read for a whole list, however many tasks."""
    rows = (
        TaskCount.objects.filter(corpus__in=corpora, count__gt=0)
        .exclude(service__name__in=ProtectedService.values)
        .values_list("corpus_id", "service__name", "bucket", "count")
    )
    per_pair: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for corpus_id, service, bucket, count in rows:
        per_pair[corpus_id, service].append((bucket, count))
    return {
        corpus_id: [ServiceCounts(name, status_counts(per_pair.get((corpus_id, name), []))) for name in services]
        for corpus_id, services in names.items()
    }


@dataclass(frozen=True)
class CorpusFacts:
    """What a corpus record says of the corpus itself, listed or alone."""

    name: str
    description: str
    state: str
    parent: str | None
    documents: int
    created_at: datetime
    imported_at: datetime | None
    url: str


@dataclass(frozen=True)
class CorpusListed(CorpusFacts):
    """A corpus as listed (CorpusSerializer): its activated services by name, and each with its counts."""

    services: list[str]
    service_counts: list[ServiceCounts]


@dataclass(frozen=True)
class CorpusDetail(CorpusFacts):
    """One corpus (CorpusDetailSerializer): every service on it, and what a sandbox was carved with."""

    services: list[CorpusService]
    condition: dict[str, Any] | None


def corpus_facts(corpus: Corpus, *, documents: int) -> CorpusFacts:
    """What a record says of the corpus itself; CorpusListed and CorpusDetail take its fields."""
    return CorpusFacts(
        name=corpus.name,
        description=corpus.description,
        state=corpus.state,
        parent=corpus.parent.name if corpus.parent is not None else None,
        documents=documents,
        created_at=corpus.created_at,
        imported_at=corpus.imported_at,
        url=f"/api/corpora/{corpus.name}",
    )


def corpus_records() -> list[CorpusListed]:
    corpora = list(corpus_list())
    names = activated_service_names(corpora)
    documents = document_counts()
    counts = activated_service_counts(corpora, names)
    return [
        CorpusListed(
            **vars(corpus_facts(c, documents=documents.get(c.pk, 0))),
            services=names.get(c.pk, []),
            service_counts=counts.get(c.pk, []),
        )
        for c in corpora
    ]


def corpus_detail(name: str) -> CorpusDetail:
    corpus = corpus_get(name)
    services = corpus_services(corpus)
    import_counts = next((s.counts["total"] for s in services if s.name == ProtectedService.IMPORT), 0)
    facts = corpus_facts(corpus, documents=import_counts)
    return CorpusDetail(**vars(facts), services=services, condition=corpus.condition)


def pair_counts(corpus_id: int, service_id: int) -> dict[str, Any]:
    """A pair's per-status counts now (and their total), from the trigger-kept counts: one indexed read."""
    rows = TaskCount.objects.filter(corpus_id=corpus_id, service_id=service_id).values_list("bucket", "count")
    return status_counts(list(rows))


def retired_messages_exist(corpus_id: int, service_id: int) -> bool:
    """Whether a rerun of the pair has retired messages that the purge has not yet deleted: their (task,
    class) rows are still under the report key, so readers of those rows leave them out meanwhile
    (corpora.message_store.messages_retire)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} WHERE corpus_id = %s AND service_id = %s)",
            [corpus_id, service_id],
        )
        return bool(cursor.fetchone()[0])


def package_tallies_sql(corpus_id: int, service_id: int) -> tuple[str, list[Any]]:
    """A statement of (kind, package, flags, task_status, tasks): the pair's package tallies
    (docs/decisions/package-attribution.md). The tallies still count a rerun's retired tasks until the purge
    deletes their rows; while there are such tasks, their usages, read from their task rows, are taken
    off here, so the answer is always the tasks whose messages count."""
    tallies = (
        f"SELECT u.kind, u.package, u.flags, x.task_status, x.tasks FROM {PACKAGE_TALLY_TABLE} x"
        f" JOIN {PACKAGE_USAGE_TABLE} u ON u.id = x.package_usage_id"
        " WHERE x.corpus_id = %s AND x.service_id = %s AND x.tasks > 0"
    )
    if not retired_messages_exist(corpus_id, service_id):
        return tallies, [corpus_id, service_id]
    return (
        "SELECT kind, package, flags, task_status, sum(tasks)::bigint AS tasks FROM ("
        f"{tallies} UNION ALL"
        " SELECT u.kind, u.package, u.flags, r.task_status, -r.tasks FROM ("
        "  SELECT m.task_status, p.usage_id, count(*) AS tasks"
        f"  FROM {STALE_MESSAGES_TABLE} z JOIN {TASK_MESSAGES_TABLE} m ON m.task_id = z.task_id,"
        "  unnest(m.packages) AS p(usage_id) WHERE z.corpus_id = %s AND z.service_id = %s GROUP BY 1, 2) r"
        f"  JOIN {PACKAGE_USAGE_TABLE} u ON u.id = r.usage_id) t"
        " GROUP BY kind, package, flags, task_status HAVING sum(tasks) > 0"
    ), [corpus_id, service_id, corpus_id, service_id]


def _like_prefix(text: str) -> str:
    """`text` as the start of a LIKE pattern: its wildcards and the escape character taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# The key of the document list's order and prefix search, as the index document_name_folded has it.
_NAME_KEY = 'lower(d.name) COLLATE "C"'


@dataclass(frozen=True)
class MessageClassName:
    """A message class by its names (MessageClassSerializer)."""

    severity: str
    category: str
    what: str


@dataclass(frozen=True)
class DocumentRow:
    """A document of a pair's list (DocumentRowSerializer, which links it)."""

    corpus: str
    service: str
    document: str
    entry: str
    status: str
    runtime_ms: int | None
    # The class of its first error or fatal message, in log order; None without one.
    problem: MessageClassName | None
    has_html: bool


@dataclass(frozen=True)
class DocumentList:
    """A page of a pair's documents (DocumentListSerializer)."""

    corpus: str
    service: str
    status: str | None
    name_prefix: str | None
    offset: int
    page_size: int
    count: int | None
    documents: list[DocumentRow]


# The page is taken first (`page`: the name index walked to its rows), then each of its at most
# MAX_REPORT_PAGE_SIZE rows is given its runtime and its first error or fatal message class by primary key:
# the task's row of messages, whose `classes` are in the order they first appear in the log. A task's row of
# messages carries the status it was written with, so a rerun's retired messages (the task is in progress
# again) are left out.
_DOCUMENT_PAGE_SQL = (
    f"SELECT p.name, p.entry, p.id, p.status, r.runtime_ms, c.severity, c.category, c.what FROM ("
    f"SELECT d.name, d.entry, t.id, t.status, {_NAME_KEY} AS name_key FROM {DOCUMENT_TABLE} d"
    f" JOIN {TASK_TABLE} t ON t.document_id = d.id WHERE {{where}}"
    f" ORDER BY {_NAME_KEY}, d.name OFFSET %s LIMIT %s) p"
    f" LEFT JOIN {TASK_RUNTIME_TABLE} r ON r.task_id = p.id"
    " LEFT JOIN LATERAL (SELECT k.severity, k.category, k.what"
    f"  FROM {TASK_MESSAGES_TABLE} m CROSS JOIN unnest(m.classes) WITH ORDINALITY AS u(class_id, position)"
    f"  JOIN {MESSAGE_CLASS_TABLE} k ON k.id = u.class_id"
    f"  WHERE m.task_id = p.id AND m.task_status = p.status"
    f"  AND k.severity IN ('{Severity.ERROR}', '{Severity.FATAL}')"
    "  ORDER BY u.position LIMIT 1) c ON true"
    " ORDER BY p.name_key, p.name"
)


def document_list(pair: Pair, *, status: str | None, name_prefix: str | None, page: Page) -> DocumentList:
    """A page of a pair's documents in the order of their names folded to lower case, each with its task's
    status, runtime and first error or fatal message class, and whether its result holds HTML (the results
    store looks). `status` (a key of STATUS_FILTERS)
    and `name_prefix` (case-insensitive) narrow it; both are served by indexes (document_name_folded, and
    task_pair_status_id for a rare status). `count` comes from the pair's counts; it is null with a
    prefix, which would have to read every match to count them."""
    where = ["d.corpus_id = %s", "t.corpus_id = %s", "t.service_id = %s"]
    params: list[Any] = [pair.corpus_id, pair.corpus_id, pair.service_id]
    if status is not None:
        where.append(STATUS_FILTERS[status])  # fixed text: the task's is the only `status` column here
    if name_prefix:
        # The pattern is folded by the same lower() as the index key, so the planner makes it a range of it.
        where.append(f"{_NAME_KEY} LIKE lower(%s) || '%%'")
        params.append(_like_prefix(name_prefix))
    with transaction.atomic(), connection.cursor() as cursor:
        # A page walks the name index and stops at its rows: two parallel workers cost more to start than
        # they save (bench/bench_documents.py: a rare status's first page took twice as long with them).
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        cursor.execute(_DOCUMENT_PAGE_SQL.format(where=" AND ".join(where)), [*params, page.offset, page.page_size])
        rows = cursor.fetchall()
    corpus, service = pair.corpus_name, pair.service_name
    documents = []
    for name, entry, task_id, task_status, runtime_ms, severity, category, what in rows:
        has_html = result_has_html(pair.corpus_id, pair.service_id, task_id)
        documents.append(
            DocumentRow(
                corpus=corpus,
                service=service,
                document=name,
                entry=entry,
                status=status_name(task_status),
                runtime_ms=runtime_ms,
                problem=MessageClassName(severity, category, what) if severity is not None else None,
                has_html=has_html,
            )
        )
    count = None if name_prefix else pair_counts(pair.corpus_id, pair.service_id)[status or "total"]
    return DocumentList(
        corpus=corpus, service=service, status=status, name_prefix=name_prefix or None, offset=page.offset,
        page_size=page.page_size, count=count, documents=documents,
    )  # fmt: skip


def task_names(task_ids: list[int]) -> dict[int, tuple[int, str, str]]:
    """(service id, corpus name, document name) of each of `task_ids` that exists, in one read."""
    if not task_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.id, t.service_id, c.name, d.name FROM {TASK_TABLE} t"
            f" JOIN {CORPUS_TABLE} c ON c.id = t.corpus_id JOIN {DOCUMENT_TABLE} d ON d.id = t.document_id"
            " WHERE t.id = ANY(%s)",
            [task_ids],
        )
        return {task_id: (service_id, corpus, document) for task_id, service_id, corpus, document in cursor}


def services_stranded() -> list[dict[str, Any]]:
    """The converting services with tasks waiting (TODO) and no live worker (services.queries.served_service_ids):
    name, tasks waiting and the corpora they wait in, by name. One read of the trigger-kept counts."""
    served = served_service_ids()
    rows = (
        TaskCount.objects.filter(bucket=TaskStatus.TODO, count__gt=0)
        .exclude(service__name__in=ProtectedService.values)
        .exclude(service_id__in=served)
        .values_list("service__name", "corpus__name", "count")
        .order_by("service__name", "corpus__name")
    )
    stranded: dict[str, dict[str, Any]] = {}
    for service, corpus, count in rows:
        entry = stranded.setdefault(service, {"service": service, "waiting": 0, "corpora": []})
        entry["waiting"] += count
        entry["corpora"].append(corpus)
    return list(stranded.values())


def taskdiff_share() -> tuple[int, int]:
    """corpora_taskdiff's size on disk (table, indexes, TOAST) and its row count, read from the diffs'
    `changed` counts rather than by counting the table: a diff's rows are its changed documents."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_total_relation_size('{TASK_DIFF_TABLE}'),"
            f" (SELECT coalesce(sum(changed), 0) FROM {SNAPSHOT_DIFF_TABLE} WHERE rows_ready)"
        )
        relation_bytes, rows = cursor.fetchone()
    return int(relation_bytes), int(rows)
