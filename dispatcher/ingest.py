"""Result ingestion: parse each returned ZIP's cortex.log and write statuses, messages and runtimes for
a whole batch in one transaction (messages by COPY). Results for tasks no longer leased, or whose
service does not match the task's, are counted and discarded, never applied.

Two steps: `results_prepare` (decode; no database) and `results_apply` (one short transaction, with
the result files written beside its statements by the writer thread of the results store,
`corpora.results`; the statements are `corpora.task_changes`' and `corpora.message_store`'s).
Decoding outside the transaction keeps the task rows locked for milliseconds rather than for the whole
batch, and lets the sink decode one batch while the last one is written."""

from __future__ import annotations

import logging
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction

from config.live import get_config
from conversion.choices import Category, Severity, TaskStatus
from conversion.logparse import Message, parse_log
from conversion.zips import zip_member
from corpora.pairs import runs_close_drained
from corpora.results import result_files_write
from corpora.task_changes import results_lock, results_retry, results_write
from corpora.telemetry import AppliedCost, AppliedTimes, results_record

logger = logging.getLogger(__name__)

LOG_NAME = "cortex.log"


@dataclass(frozen=True)
class RawResult:
    identity: str
    service: str
    task_id: str
    data: bytes
    received_at: float | None = None  # Unix time the sink received it: the end of its conversion (telemetry)


@dataclass(frozen=True)
class Decoded:
    status: int
    messages: list[Message]
    runtime_ms: int | None
    archive: bytes | None
    # The machine ended the conversion, not the document (`Fatal:infrastructure:<reason>`): the reason, else None.
    infrastructure: str | None = None
    cpu_ms: int | None = None  # the worker's measures of the conversion (Info:cpu_ms, Info:peak_rss_kb)
    peak_rss_kb: int | None = None


@dataclass
class IngestOutcome:
    ingested: int = 0
    discarded: int = 0
    retried: int = 0  # results of conversions the machine ended (infrastructure fatals), their tasks sent back to TODO
    pairs: set[tuple[int, int]] = field(default_factory=set)


class BadResult(Exception):
    """A result that cannot be read at all (not a ZIP): discarded, the lease runs out and it is retried."""


def _fatal(what: str, details: str, category: str = "cortex") -> Message:
    return Message(severity=Severity.FATAL, category=category, what=what, details=details)


def result_decode(data: bytes, *, max_bytes: int) -> Decoded:
    """Status, messages and runtime of one returned result."""
    if not data:
        return Decoded(TaskStatus.FATAL, [_fatal("empty_result", "the worker returned no data")], None, None)
    if len(data) > max_bytes:
        message = _fatal("too_large", f"result of {len(data)} bytes exceeds the limit of {max_bytes}", Category.INVALID)
        return Decoded(TaskStatus.INVALID, [message], None, None)
    try:
        log = zip_member(data, LOG_NAME)
    except KeyError:
        return Decoded(TaskStatus.FATAL, [_fatal("missing_log", "the result archive has no cortex.log")], None, data)
    except zipfile.BadZipFile as exc:
        raise BadResult(str(exc)) from exc
    parsed = parse_log(log)
    # The engine writes an infrastructure message as the log's last Fatal, after all latexmlc said.
    last_fatal = next((m for m in reversed(parsed.messages) if m.severity == Severity.FATAL), None)
    reason = last_fatal.what if last_fatal is not None and last_fatal.category == Category.INFRASTRUCTURE else None
    return Decoded(parsed.status, parsed.messages, parsed.runtime_ms, data, reason, parsed.cpu_ms, parsed.peak_rss_kb)


@dataclass(frozen=True)
class Prepared:
    """A decoded result waiting to be applied."""

    task_id: int
    service_id: int
    decoded: Decoded
    received_at: float | None = None
    identity: str = ""  # the worker thread that returned it


@dataclass
class PreparedBatch:
    results: list[Prepared] = field(default_factory=list)
    discarded: int = 0


def results_prepare(results: list[RawResult], *, service_ids: dict[str, int], max_bytes: int) -> PreparedBatch:
    """The part of ingestion that needs no database: check ids and decode each result.
    Results with a bad id, an unknown service or unreadable data are discarded here (counted)."""
    batch = PreparedBatch()
    seen: set[int] = set()
    for result in results:
        try:
            task_id = int(result.task_id)
        except ValueError:
            batch.discarded += 1
            continue
        service_id = service_ids.get(result.service)
        if task_id in seen or service_id is None:
            batch.discarded += 1
            continue
        seen.add(task_id)
        try:
            decoded = result_decode(result.data, max_bytes=max_bytes)
        except BadResult as exc:
            logger.warning("discarding unreadable result for task %s from %s: %s", task_id, result.identity, exc)
            batch.discarded += 1
            continue
        batch.results.append(Prepared(task_id, service_id, decoded, result.received_at, result.identity))
    return batch


def results_apply(batch: PreparedBatch, *, results_dir: Path, max_attempts: int | None = None) -> IngestOutcome:
    """Apply prepared results in one short transaction: only those whose task is still leased and of the
    same service; their files are written before the statuses that point to them commit, and
    the runs of pairs left with no task to do are closed in it, and the results' stage times are counted
    into their runs' telemetry (corpora.telemetry.results_record). A result the machine ended (an
    infrastructure fatal: the worker's governor, the host's OOM killer) sends its task back to TODO instead,
    its worker noted so that another one gets it, while it has used fewer than `max_attempts` (the
    dispatcher's setting by default), and is applied as the infrastructure fatal it is on the last attempt."""
    outcome = IngestOutcome(discarded=batch.discarded)
    if not batch.results:
        return outcome
    if max_attempts is None:
        max_attempts = get_config().DISPATCHER_MAX_ATTEMPTS
    rows: list[tuple[int, int, int, Decoded]] = []
    with transaction.atomic(), connection.cursor() as cursor:
        leased = results_lock(cursor, [prepared.task_id for prepared in batch.results])
        writes: list[tuple[int, int, int, bytes]] = []
        times: list[AppliedTimes] = []
        costs: list[AppliedCost] = []
        retry: list[tuple[int, str]] = []
        for prepared in batch.results:
            task = leased.get(prepared.task_id)
            if task is None or prepared.service_id != task.service_id:
                outcome.discarded += 1
                continue
            if prepared.decoded.infrastructure is not None and task.attempts < max_attempts:
                retry.append((prepared.task_id, prepared.identity))
                continue
            if prepared.decoded.archive is not None:
                writes.append((task.corpus_id, task.service_id, prepared.task_id, prepared.decoded.archive))
            rows.append((prepared.task_id, task.corpus_id, task.service_id, prepared.decoded))
            if task.run_id is not None:
                times.append((task.run_id, task.leased_at, task.waiting_since, prepared.received_at))
                costs.append((task.run_id, prepared.decoded.cpu_ms, prepared.decoded.peak_rss_kb))
        results_retry(cursor, retry)
        outcome.retried = len(retry)
        if rows:
            # The files are written (system calls, without the GIL) beside the statements and are complete
            # before the commit: a status never commits ahead of its file. Should a file fail (a full disk),
            # the files this batch created are removed and the OSError rolls the transaction back; should the
            # transaction fail, the files written stay; the tasks are still leased, and their next result
            # replaces them.
            writing = result_files_write(results_dir, writes)
            outcome.pairs = {(corpus_id, service_id) for _, corpus_id, service_id, _ in rows}
            try:
                # Before the statuses: results_write's last statement holds the pair's count rows to the commit.
                results_record(cursor, times, costs=costs)
                results_write(cursor, rows)
                # In the same transaction, so no one (nor a dispatcher killed right after) sees a pair
                # with every task done and its run still open.
                runs_close_drained(outcome.pairs)
            finally:
                writing.result()
    outcome.ingested = len(rows)
    return outcome


def result_ingest(
    results: list[RawResult], *, service_ids: dict[str, int], results_dir: Path, max_bytes: int
) -> IngestOutcome:
    """Prepare and apply a batch of results; returns how many were applied and discarded and the pairs
    touched. (The dispatcher's sink runs the two steps on two threads, overlapping batches.)"""
    batch = results_prepare(results, service_ids=service_ids, max_bytes=max_bytes)
    return results_apply(batch, results_dir=results_dir)
