"""Writes on corpora: import, extend, delete, activate and deactivate services, each journaled. Bulk work
is COPY and set-based SQL inside one transaction, so a failure leaves nothing half-written."""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accounts.actions import journaled
from accounts.choices import Action
from config.api.deletions import Deleted
from config.errors import BadRequest, Conflict, NotFound
from config.names import name_check
from config.planner import BULK_SETTINGS
from config.transient import transient_note, transient_retry
from conversion.archive import Entry
from corpora import scan
from corpora.choices import ClassLevel, CorpusState
from corpora.models import Activation, Corpus, Run
from corpora.pairs import data_purge, run_open, runs_close_drained
from corpora.queries.corpora import corpus_get, pair_get, retired_messages_exist
from corpora.statuses import SEVERITIES, severity_check
from corpora.tables import (
    DOCUMENT_TABLE,
    MESSAGE_CLASS_TABLE,
    MESSAGE_TALLY_TABLE,
    STALE_MESSAGES_TABLE,
    TASK_CLASS_TABLE,
    TASK_TABLE,
)
from corpora.task_changes import activation_tasks_create, extend_tasks_create, import_tasks_create, sandbox_tasks_create
from jobs.actions import job_enqueue
from jobs.choices import JobKinds
from jobs.models import Job
from jobs.runner import JobFailed
from services.actions import protected_service
from services.choices import ProtectedService
from services.queries import service_get

logger = logging.getLogger(__name__)

Progress = Callable[..., None]
Log = Callable[[str], None]


def _retry_logged(log: Log) -> Callable[[BaseException, int, float], None]:
    """transient_retry's on_retry for a job's transaction: the retry shows in the job's log."""
    return lambda exc, attempt, wait: log(transient_note(exc, attempt, wait))


def _import_service_id() -> int:
    return protected_service(ProtectedService.IMPORT).pk


@dataclass(frozen=True)
class Ingested:
    """What an import or extend job wrote (its job result, corpora/tasks/corpora.py): documents recorded,
    TODO tasks created on the activated services (extend), entries found invalid and entries inspected."""

    documents: int
    todo_tasks: int
    invalid: int
    entries_seen: int


@dataclass(frozen=True)
class Written:
    """What one import or extend transaction wrote: documents and (extend) TODO tasks."""

    documents: int
    todo_tasks: int


@dataclass(frozen=True)
class Activated:
    """What an activation job made (its job result): the TODO tasks created and the run opened."""

    tasks: int
    run_id: int


@dataclass(frozen=True)
class Carved:
    """What a sandbox's carve job wrote (its job result): the documents it references."""

    documents: int


# --- import and extend -------------------------------------------------------------------------


@journaled(Action.CORPUS_IMPORT, target="{name}")
def corpus_import(*, name: str, path: str, actor: str, description: str = "", send: bool = True) -> Job:
    """Create the corpus (state importing) and its import job in one transaction."""
    name_check(name)
    directory = scan.corpus_path_check(path)
    try:
        with transaction.atomic():
            corpus = Corpus.objects.create(name=name, path=str(directory), description=description or "")
            job, _ = job_enqueue(
                kind=JobKinds.CORPUS_IMPORT, actor=actor, params={"corpus_id": corpus.pk, "name": name}, send=send
            )
    except IntegrityError as exc:
        raise Conflict(f"A corpus named {name!r} exists already.") from exc
    return job


@journaled(Action.CORPUS_EXTEND, target="{name}")
def corpus_extend(*, name: str, actor: str, send: bool = True) -> Job:
    corpus = corpus_get(name)
    if corpus.parent_id is not None:
        raise Conflict(f"The corpus {name!r} is a sandbox: it has no directory of its own to extend.")
    if corpus.state == CorpusState.IMPORTING:
        raise Conflict(f"The corpus {name!r} is still importing; extend it once the import has finished.")
    job, _ = job_enqueue(
        kind=JobKinds.CORPUS_EXTEND, actor=actor, params={"corpus_id": corpus.pk, "name": name}, send=send
    )
    return job


def corpus_import_run(*, corpus_id: int, progress: Progress, log: Log) -> Ingested:
    """The import job: inspect every entry, then write documents, import tasks and messages at once.
    On any failure the half-created corpus is removed, so the name can be used again."""
    try:
        result = _ingest_entries(corpus_id=corpus_id, progress=progress, log=log, extend=False)
    except Exception:
        data_purge(corpus_id=corpus_id, actor="")  # a half-created corpus: no result archive to remove
        raise
    return result


def corpus_extend_run(*, corpus_id: int, progress: Progress, log: Log, actor: str = "") -> Ingested:
    """The extend job: only entries not yet in the corpus are added, with TODO tasks on every
    activated service, each of which gets a new run; existing documents, tasks and results are not touched."""
    return _ingest_entries(corpus_id=corpus_id, progress=progress, log=log, extend=True, actor=actor)


def _ingest_entries(*, corpus_id: int, progress: Progress, log: Log, extend: bool, actor: str = "") -> Ingested:
    corpus = Corpus.objects.filter(pk=corpus_id).first()
    if corpus is None:
        raise JobFailed("The corpus was deleted before its job ran.")
    directory = Path(corpus.path)
    if not scan.within_roots(directory) or not directory.is_dir():
        raise JobFailed(f"{corpus.path} is no longer a directory inside the corpus roots.")
    try:
        names = scan.entry_names(directory)
    except OSError as exc:
        raise JobFailed(f"{corpus.path} cannot be read: {exc.strerror}") from exc
    if extend:
        known = set(corpus.documents.filter(entry__in=names).values_list("entry", flat=True)) if names else set()
        names = [n for n in names if n not in known]
    log(f"{len(names)} {'new ' if extend else ''}entries to inspect in {directory}")
    progress(0, len(names), "inspecting entries")
    entries = _unique_names(scan.scan(directory, names, lambda done, total: progress(done, total)))
    progress(len(names), len(names), "writing documents")
    attempts = 0

    def write() -> Written:
        nonlocal attempts
        attempts += 1
        # After an attempt whose commit was lost with its connection, what it wrote may be there: only the
        # entries not in the corpus are written again.
        pending = entries if attempts == 1 else _entries_not_written(corpus, entries)
        with transaction.atomic():
            if extend and any(not e.problem for e in pending):
                # Before the new TODO tasks, so that each open run is frozen with the statuses it produced.
                for service_id in Activation.objects.filter(corpus=corpus).values_list("service_id", flat=True):
                    run_open(corpus_id=corpus.pk, service_id=service_id, owner=actor, description="extend")
            written = _write_documents(corpus, pending, extend=extend)
            if not extend:
                Corpus.objects.filter(pk=corpus.pk).update(state=CorpusState.READY, imported_at=timezone.now())
        return written

    # The scan is not repeated: only the transaction that writes what it found is tried again.
    written = transient_retry(write, what=f"writing the documents of corpus {corpus.pk}", on_retry=_retry_logged(log))
    invalid = sum(1 for e in entries if e.problem)
    log(f"recorded {written.documents} documents ({invalid} invalid)")
    return Ingested(written.documents, written.todo_tasks, invalid=invalid, entries_seen=len(names))


def _entries_not_written(corpus: Corpus, entries: list[Entry]) -> list[Entry]:
    """The entries that have no document in the corpus."""
    written = set(corpus.documents.filter(entry__in=[e.entry for e in entries]).values_list("entry", flat=True))
    return [e for e in entries if e.entry not in written]


def _unique_names(entries: Iterable[Entry]) -> list[Entry]:
    """Two entries can share a short name (a.tex and a.zip); the later keeps its full entry name."""
    seen: set[str] = set()
    unique = []
    for entry in entries:
        name = entry.name if entry.name not in seen else entry.entry
        seen.add(name)
        unique.append(entry if name == entry.name else Entry(**{**entry.__dict__, "name": name}))
    return unique


def _write_documents(corpus: Corpus, entries: list[Entry], *, extend: bool) -> Written:
    """COPY the entries into a temporary table, then insert documents, import tasks, invalid-entry
    messages and (on extend) TODO tasks for the activated services, each in one statement."""
    import_id = _import_service_id()
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.import_entries")
        cursor.execute(
            "CREATE TEMP TABLE import_entries (name text, entry text, kind text, main_file text,"
            " problem text, detail text, document_id bigint) ON COMMIT DROP"
        )
        with cursor.cursor.copy(
            "COPY import_entries (name, entry, kind, main_file, problem, detail) FROM STDIN"
        ) as copy:
            for e in entries:
                copy.write_row((e.name[:255], e.entry[:1024], e.kind, e.main_file[:1024], e.problem, e.detail[:2000]))
        # Fresh statistics, so the joins below are index lookups sized to this import rather than hashes
        # over every import task in the database.
        cursor.execute("ANALYZE import_entries")
        # A short name already used by an older document of the corpus: fall back to the entry name.
        cursor.execute(
            f"UPDATE import_entries e SET name = e.entry FROM {DOCUMENT_TABLE} d"
            " WHERE d.corpus_id = %s AND d.name = e.name",
            [corpus.pk],
        )
        cursor.execute(
            f"INSERT INTO {DOCUMENT_TABLE} (corpus_id, name, entry, kind, main_file, created_at)"
            " SELECT %s, name, entry, kind, main_file, now() FROM import_entries",
            [corpus.pk],
        )
        documents = cursor.rowcount
        cursor.execute(
            f"UPDATE import_entries e SET document_id = d.id FROM {DOCUMENT_TABLE} d"
            " WHERE d.corpus_id = %s AND d.entry = e.entry",
            [corpus.pk],
        )
        import_tasks_create(cursor, corpus_id=corpus.pk, import_service_id=import_id)
        todo = extend_tasks_create(cursor, corpus_id=corpus.pk) if extend else 0
    return Written(documents=documents, todo_tasks=todo)


# --- delete --------------------------------------------------------------------------------------


@journaled(Action.CORPUS_DELETE, target="{name}")
def corpus_delete(*, name: str, confirm: str | None, actor: str) -> Deleted:
    """Delete a corpus with its documents, tasks, messages and result archives; other corpora are untouched."""
    corpus = corpus_get(name)
    if confirm != name:
        raise BadRequest(f"Pass confirm={name} to delete the corpus {name!r} with all its tasks and messages.")
    _sandboxes_refuse(corpus)
    try:
        return data_purge(corpus_id=corpus.pk, actor=actor)
    except IntegrityError as exc:  # a sandbox carved meanwhile still references it
        _sandboxes_refuse(corpus)
        raise Conflict(f"The corpus {name!r} changed while it was being deleted; try again.") from exc


# --- activate and deactivate ----------------------------------------------------------------------


@journaled(Action.SERVICE_ACTIVATION, target="{corpus_name}/{service_name}")
def service_activate(*, corpus_name: str, service_name: str, actor: str, send: bool = True) -> Job:
    """Register a service on a corpus and start the job that creates its TODO tasks."""
    corpus, service = pair_get(corpus_name, service_name)
    if service.is_protected:
        raise Conflict(f"{service_name!r} is an infrastructure service; it cannot be activated on a corpus.")
    if corpus.state == CorpusState.IMPORTING:
        raise Conflict(f"The corpus {corpus_name!r} is still importing; activate services once it has finished.")
    try:
        with transaction.atomic():
            activation = Activation.objects.create(corpus=corpus, service=service, actor=actor)
            job, _ = job_enqueue(
                kind=JobKinds.SERVICE_ACTIVATE,
                actor=actor,
                params={"activation_id": activation.pk, "corpus": corpus_name, "service": service_name},
                send=send,
            )
    except IntegrityError as exc:
        raise Conflict(f"The service {service_name!r} is already active on the corpus {corpus_name!r}.") from exc
    return job


def service_activate_run(*, activation_id: int, progress: Progress, log: Log) -> Activated:
    """One TODO task per valid document (documents whose import was invalid get none), and a new run.
    Tasks that exist already are left as they are, so no result is ever wiped."""
    activation = Activation.objects.filter(pk=activation_id).select_related("corpus", "service").first()
    if activation is None:
        raise JobFailed("The activation was withdrawn before its job ran.")
    progress(0, 1, "creating tasks")

    def create() -> tuple[int, Run]:
        with transaction.atomic():
            # Tasks that exist are left as they are, so an attempt after one whose commit was lost creates
            # none, and finds that attempt's run open rather than opening another.
            created = activation_tasks_create(
                corpus_id=activation.corpus_id,
                service_id=activation.service_id,
                import_service_id=_import_service_id(),
            )
            corpus_id, service_id = activation.corpus_id, activation.service_id
            opened = Run.objects.filter(
                corpus_id=corpus_id,
                service_id=service_id,
                finished_at__isnull=True,
                started_at__gte=activation.created_at,
            )
            run = opened.first() or run_open(corpus_id=corpus_id, service_id=service_id, owner=activation.actor)
        return created, run

    try:
        created, run = transient_retry(create, what=f"activation {activation_id}", on_retry=_retry_logged(log))
    except Exception:
        Activation.objects.filter(pk=activation_id).delete()  # nothing was created: withdraw the activation
        raise
    runs_close_drained({(activation.corpus_id, activation.service_id)})  # no document: nothing to wait for
    log(f"created {created} TODO tasks for {activation.service.name} on {activation.corpus.name}")
    progress(1, 1, f"created {created} tasks")
    return Activated(tasks=created, run_id=run.pk)


@journaled(Action.SERVICE_DEACTIVATION, target="{corpus_name}/{service_name}")
def service_deactivate(*, corpus_name: str, service_name: str, confirm: str | None, actor: str) -> Deleted:
    """Delete the tasks, messages and result archives of one (corpus, service) pair; nothing else is touched."""
    corpus, service = pair_get(corpus_name, service_name)
    if not Activation.objects.filter(corpus=corpus, service=service).exists():
        raise NotFound(f"The service {service_name!r} is not active on the corpus {corpus_name!r}.")
    if confirm != service_name:
        raise BadRequest(f"Pass confirm={service_name} to deactivate {service_name!r} and delete its results here.")
    return data_purge(corpus_id=corpus.pk, service_id=service.pk, actor=actor)


# --- sandbox corpora ------------------------------------------------------------------------------
# A sandbox is a corpus carved from a parent: the parent's documents whose task for a service matches a
# condition. Its documents reference the parent's entries (its path is the parent's), so nothing is
# copied; its tasks, messages and result files are its own (docs/decisions/profile-experiments.md).

SANDBOX_FIELDS = ("service", "status", "severity", "category", "what", "entry_contains", "limit", "per_class_limit")


def sandbox_condition_check(request: dict[str, Any]) -> dict[str, Any]:
    """The condition of a SandboxRequest, or BadRequest when it cannot match by construction."""
    condition = {key: request[key] for key in SANDBOX_FIELDS if request.get(key) not in (None, "")}
    condition["seed"] = int(request.get("seed") or 0)
    for key in ("status", "severity"):
        if key in condition:
            severity_check(condition[key], key)
    if "what" in condition and "category" not in condition:
        raise BadRequest("A what narrows a category: give the category too.", errors={"what": ["needs a category"]})
    if "category" in condition and "severity" not in condition:
        raise BadRequest(
            "A category narrows a severity: give the severity too.", errors={"category": ["needs a severity"]}
        )
    if "per_class_limit" in condition and "severity" not in condition:
        raise BadRequest(
            "per_class_limit samples each (severity, category, what) class: give the severity.",
            errors={"per_class_limit": ["needs a severity"]},
        )
    return condition


@journaled(Action.CORPUS_SANDBOX, target="{parent}/{name}")
def corpus_sandbox(*, parent: str, actor: str, send: bool = True, **request: Any) -> Job:
    """Create the sandbox corpus (state importing, its name reserved) and its carve job in one transaction."""
    name = request["name"]
    name_check(name)
    source = corpus_get(parent)
    service = service_get(request["service"])
    if not Activation.objects.filter(corpus=source, service=service).exists():
        raise NotFound(f"The service {service.name!r} is not active on the corpus {parent!r}.")
    condition = sandbox_condition_check(request)
    if source.state == CorpusState.IMPORTING:
        raise Conflict(f"The corpus {parent!r} is still importing; carve a sandbox once it has finished.")
    try:
        with transaction.atomic():
            corpus = Corpus.objects.create(
                name=name, path=source.path, parent=source, condition=condition,
                description=f"Sandbox of {parent} ({service.name})",
            )  # fmt: skip
            job, _ = job_enqueue(
                kind=JobKinds.CORPUS_SANDBOX, actor=actor,
                params={"corpus_id": corpus.pk, "name": name, "parent": parent}, send=send,
            )  # fmt: skip
    except IntegrityError as exc:
        raise Conflict(f"A corpus named {name!r} exists already.") from exc
    return job


def _sandboxes_refuse(corpus: Corpus) -> None:
    """Conflict naming the sandboxes carved from a corpus, if any: they reference its entries."""
    names = list(Corpus.objects.filter(parent=corpus).order_by("name").values_list("name", flat=True))
    if names:
        raise Conflict(
            f"The corpus {corpus.name!r} has sandboxes that reference its entries: {', '.join(names)};"
            " delete them first.",
            errors={"sandboxes": names},
        )


def corpus_sandbox_run(*, corpus_id: int, progress: Progress, log: Log) -> Carved:
    """The carve job: select the parent's matching documents in one statement, then write the sandbox's
    documents and import tasks. On any failure the half-made sandbox is removed, so the name is free again."""
    try:
        return _sandbox_carve(corpus_id=corpus_id, progress=progress, log=log)
    except Exception:
        data_purge(corpus_id=corpus_id, actor="")  # a half-created corpus: no result archive to remove
        raise


def _sandbox_carve(*, corpus_id: int, progress: Progress, log: Log) -> Carved:
    corpus = Corpus.objects.filter(pk=corpus_id).first()
    if corpus is None:
        raise JobFailed("The sandbox was deleted before its job ran.")
    parent = corpus.parent
    if parent is None or not corpus.condition:
        raise JobFailed("The sandbox's parent was deleted before its job ran.")
    condition = corpus.condition
    service = service_get(condition["service"])
    progress(0, 2, "selecting documents")
    select, params = _sandbox_selection(parent_id=parent.pk, service_id=service.pk, condition=condition)
    attempts = 0

    def carve() -> int:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and Corpus.objects.filter(pk=corpus.pk, state=CorpusState.READY).exists():
            return corpus.documents.count()  # the attempt whose commit was lost with its connection committed
        return _sandbox_write(corpus, parent.name, select, params, progress=progress, log=log)

    documents = transient_retry(carve, what=f"carving sandbox {corpus.pk}", on_retry=_retry_logged(log))
    progress(2, 2, f"carved {documents} documents")
    log(f"recorded {documents} documents referencing the entries of {parent.name}")
    return Carved(documents=documents)


def _sandbox_write(
    corpus: Corpus, parent_name: str, select: str, params: list[Any], *, progress: Progress, log: Log
) -> int:
    """The carve's one transaction: the picked documents, their import tasks, the sandbox ready."""
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in BULK_SETTINGS:
            cursor.execute(statement)
        cursor.execute("DROP TABLE IF EXISTS pg_temp.sandbox_pick")
        cursor.execute(f"CREATE TEMP TABLE sandbox_pick ON COMMIT DROP AS {select}", params)
        picked = cursor.rowcount
        log(f"{picked} documents of {parent_name} match")
        progress(1, 2, "writing documents")
        cursor.execute(
            f"INSERT INTO {DOCUMENT_TABLE} (corpus_id, name, entry, kind, main_file, created_at)"
            " SELECT %s, d.name, d.entry, d.kind, d.main_file, now()"
            f" FROM sandbox_pick p JOIN {DOCUMENT_TABLE} d ON d.id = p.document_id ORDER BY d.id",
            [corpus.pk],
        )
        documents: int = cursor.rowcount
        sandbox_tasks_create(cursor, corpus_id=corpus.pk, import_service_id=_import_service_id())
        Corpus.objects.filter(pk=corpus.pk).update(state=CorpusState.READY, imported_at=timezone.now())
    return documents


# Hashes are uniform over the bigints, so of a class of n tasks about k * 2^64 / n fall below
# -2^63 + k * 2^64 / n: a sample of `limit` needs only those.
_SAMPLE_KEPT = 64


def _per_class_sample(
    *, pair: list[int], statuses: list[int] | None, classes: tuple[str, list[Any]], entry: tuple[str, list[Any]],
    seed: int, limit: int,
) -> tuple[str, list[Any]]:  # fmt: skip
    """The tasks that are among the first `limit` of any class in scope, ordered by (hashint8extended(task,
    seed), task), and the statement's parameters. A class of more than `kept` tasks (from the tallies)
    keeps only the rows whose hash lies below a bound that about `kept` of them pass; a class left with
    fewer than `limit` rows by the bound (chance, or the entry filter) takes all of its rows. Every row
    under a bound comes before every row above it, so the sample is the one a rank over every row of
    every class gives, without sorting tens of millions of rows (docs/decisions/profile-experiments.md)."""
    where, class_params = classes
    entry_sql, entry_params = entry
    kept = 4 * limit + _SAMPLE_KEPT
    rows = (
        f"SELECT p.task_id, hashint8extended(p.task_id, %s) AS hash FROM {TASK_CLASS_TABLE} p"
        " WHERE p.corpus_id = %s AND p.service_id = %s AND p.task_status = ANY(%s)"
        f" AND p.message_class_id = {{0}}.message_class_id{entry_sql}"
    )
    rows_params = [seed, *pair, statuses, *entry_params]
    statement = f"""
        WITH sizes AS MATERIALIZED (
               SELECT t.message_class_id,
                      CASE WHEN sum(t.tasks) > %s THEN (-9223372036854775808
                           + floor(18446744073709551615::numeric * %s / sum(t.tasks)))::bigint END AS bound
                 FROM {MESSAGE_CLASS_TABLE} c JOIN {MESSAGE_TALLY_TABLE} t ON t.corpus_id = %s AND t.service_id = %s
                  AND t.task_status = ANY(%s) AND t.message_class_id = c.id
                WHERE {where} AND t.tasks > 0 GROUP BY 1),
             kept AS MATERIALIZED (
               SELECT z.message_class_id, r.task_id, r.hash FROM sizes z CROSS JOIN LATERAL ({rows.format("z")}) r
                WHERE z.bound IS NULL OR r.hash < z.bound),
             short AS (
               SELECT z.message_class_id FROM sizes z
                 LEFT JOIN (SELECT message_class_id, count(*) AS n FROM kept GROUP BY 1) k USING (message_class_id)
                WHERE z.bound IS NOT NULL AND coalesce(k.n, 0) < %s),
             pool AS (
               SELECT * FROM kept WHERE message_class_id NOT IN (SELECT message_class_id FROM short)
               UNION ALL
               SELECT s.message_class_id, r.task_id, r.hash FROM short s CROSS JOIN LATERAL ({rows.format("s")}) r)
        SELECT DISTINCT w.task_id FROM (SELECT task_id, row_number() OVER (PARTITION BY message_class_id
               ORDER BY hash, task_id) AS n FROM pool) w WHERE w.n <= %s
    """
    params = [kept, kept, *pair, statuses, *class_params, *rows_params, limit, *rows_params, limit]
    return statement, params


def _sandbox_selection(*, parent_id: int, service_id: int, condition: dict[str, Any]) -> tuple[str, list[Any]]:
    """One SELECT of the parent's document ids that the condition takes (set-based). Samples are ordered
    by hashint8extended(task id, seed), so the same request takes the same documents again. Only fixed
    fragments are joined into the statement; every value is a parameter, in the order of the text."""
    severity, status = condition.get("severity"), condition.get("status")
    named: str | None = status or severity
    statuses = list(SEVERITIES[named][0]) if named else None
    if condition.get("statuses"):  # an experiment's sandbox: the tasks of several statuses (no severity)
        statuses = [code for key in condition["statuses"] for code in SEVERITIES[key][0]]
    seed = int(condition.get("seed", 0))
    pair = [parent_id, service_id]
    # The tasks of the pair whose entry holds the substring (a filter before any sample is drawn).
    entry = condition.get("entry_contains")
    entry_sql = (
        f" AND {{0}} IN (SELECT e.id FROM {TASK_TABLE} e JOIN {DOCUMENT_TABLE} d ON d.id = e.document_id"
        " WHERE e.corpus_id = %s AND e.service_id = %s AND strpos(d.entry, %s) > 0)"
    )
    entry_params = [*pair, entry] if entry else []
    if severity is None:
        where = "t.corpus_id = %s AND t.service_id = %s" + (" AND t.status = ANY(%s)" if statuses else "")
        candidates = f"SELECT t.id AS task_id FROM {TASK_TABLE} t WHERE {where}"
        params: list[Any] = [*pair, *([statuses] if statuses else [])]
        if entry:
            candidates += entry_sql.format("t.id")
            params += entry_params
    else:
        # For each class in scope, one range of the (task, class) rows' report index per status (they
        # carry their task's status).
        narrow = "".join(f" AND c.{key} = %s" for key in ("category", "what") if condition.get(key) is not None)
        narrow_params = [condition[key] for key in ("category", "what") if condition.get(key) is not None]
        classes = f"c.level = {ClassLevel.CLASS} AND c.severity = %s{narrow}"
        class_params = [SEVERITIES[severity][1], *narrow_params]
        entry_rows = entry_sql.format("p.task_id") if entry else ""
        if retired_messages_exist(parent_id, service_id):  # rows a rerun retired wait for the purge
            entry_rows += f" AND NOT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = p.task_id)"
        if condition.get("per_class_limit"):
            candidates, params = _per_class_sample(
                pair=pair, statuses=statuses, classes=(classes, class_params), entry=(entry_rows, entry_params),
                seed=seed, limit=condition["per_class_limit"],
            )  # fmt: skip
        else:
            candidates = (
                f"SELECT DISTINCT p.task_id FROM {MESSAGE_CLASS_TABLE} c JOIN {TASK_CLASS_TABLE} p"
                " ON p.corpus_id = %s AND p.service_id = %s AND p.task_status = ANY(%s) AND p.message_class_id = c.id"
                f" WHERE {classes}{entry_rows}"
            )
            params = [*pair, statuses, *class_params, *entry_params]
    if condition.get("limit"):
        candidates = (
            f"SELECT p.task_id FROM ({candidates}) p ORDER BY hashint8extended(p.task_id, %s), p.task_id LIMIT %s"
        )
        params += [seed, condition["limit"]]
    return f"SELECT t.document_id FROM ({candidates}) q JOIN {TASK_TABLE} t ON t.id = q.task_id", params
