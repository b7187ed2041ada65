"""Result ingestion: parse each returned ZIP's cortex.log and write statuses, messages and runtimes for
a whole batch in one transaction (messages by COPY). Results for tasks no longer leased, or whose
service does not match the task's, are counted and discarded, never applied."""

from __future__ import annotations

import io
import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction

from conversion.logparse import Message, parse_log

logger = logging.getLogger(__name__)

LOG_NAME = "cortex.log"


@dataclass(frozen=True)
class RawResult:
    identity: str
    service: str
    task_id: str
    data: bytes


@dataclass(frozen=True)
class Decoded:
    status: int
    messages: list[Message]
    runtime_ms: int | None
    archive: bytes | None


@dataclass
class IngestOutcome:
    ingested: int = 0
    discarded: int = 0
    pairs: set[tuple[int, int]] = field(default_factory=set)


class BadResult(Exception):
    """A result that cannot be read at all (not a ZIP): discarded, the lease runs out and it is retried."""


def _fatal(what: str, details: str, category: str = "cortex") -> Message:
    return Message(severity="fatal", category=category, what=what, details=details)


def result_decode(data: bytes, *, max_bytes: int) -> Decoded:
    """Status, messages and runtime of one returned result."""
    if not data:
        return Decoded(-4, [_fatal("empty_result", "the worker returned no data")], None, None)
    if len(data) > max_bytes:
        message = _fatal("too_large", f"result of {len(data)} bytes exceeds the limit of {max_bytes}", "invalid")
        return Decoded(-5, [message], None, None)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            try:
                log = archive.read(LOG_NAME)
            except KeyError:
                return Decoded(-4, [_fatal("missing_log", "the result archive has no cortex.log")], None, data)
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise BadResult(str(exc)) from exc
    parsed = parse_log(log)
    return Decoded(parsed.status, parsed.messages, parsed.runtime_ms, data)


def _store_archive(results_dir: Path, corpus_id: int, service_id: int, task_id: int, archive: bytes) -> None:
    directory = results_dir / str(corpus_id) / str(service_id)
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{task_id}.zip.tmp"
    temporary.write_bytes(archive)
    os.replace(temporary, directory / f"{task_id}.zip")


def result_path(results_dir: Path, corpus_id: int, service_id: int, task_id: int) -> Path:
    """Where the result archive of a task is kept (for the document report and export)."""
    return results_dir / str(corpus_id) / str(service_id) / f"{task_id}.zip"


def result_ingest(
    results: list[RawResult], *, service_ids: dict[str, int], results_dir: Path, max_bytes: int
) -> IngestOutcome:
    """Apply a batch of results; returns how many were applied and discarded and the pairs touched."""
    outcome = IngestOutcome()
    wanted: dict[int, RawResult] = {}
    for result in results:
        try:
            task_id = int(result.task_id)
        except ValueError:
            outcome.discarded += 1
            continue
        if task_id in wanted or result.service not in service_ids:
            outcome.discarded += 1
            continue
        wanted[task_id] = result
    if not wanted:
        return outcome
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, corpus_id, service_id FROM corpora_task WHERE id = ANY(%s) AND status > 0 FOR UPDATE",
            [list(wanted)],
        )
        leased = {task_id: (corpus_id, service_id) for task_id, corpus_id, service_id in cursor.fetchall()}
        rows: list[tuple[int, int, int, Decoded]] = []
        for task_id, result in wanted.items():
            pair = leased.get(task_id)
            if pair is None or service_ids[result.service] != pair[1]:
                outcome.discarded += 1
                continue
            try:
                decoded = result_decode(result.data, max_bytes=max_bytes)
            except BadResult as exc:
                logger.warning("discarding unreadable result for task %s from %s: %s", task_id, result.identity, exc)
                outcome.discarded += 1
                continue
            if decoded.archive is not None:
                _store_archive(results_dir, pair[0], pair[1], task_id, decoded.archive)
            rows.append((task_id, pair[0], pair[1], decoded))
        if not rows:
            return outcome
        ids = [row[0] for row in rows]
        cursor.execute("DELETE FROM reports_logmessage WHERE task_id = ANY(%s)", [ids])
        cursor.execute("DELETE FROM reports_taskruntime WHERE task_id = ANY(%s)", [ids])
        cursor.execute(
            "UPDATE corpora_task t SET status = v.status, leased_until = NULL"
            " FROM unnest(%s::bigint[], %s::integer[]) AS v(id, status) WHERE t.id = v.id",
            [ids, [row[3].status for row in rows]],
        )
        with cursor.cursor.copy(
            "COPY reports_logmessage (task_id, corpus_id, service_id, severity, category, what, details) FROM STDIN"
        ) as copy:
            for task_id, corpus_id, service_id, decoded in rows:
                for m in decoded.messages:
                    copy.write_row((task_id, corpus_id, service_id, m.severity, m.category, m.what, m.details))
        runtimes = [(t, c, s, d.runtime_ms) for t, c, s, d in rows if d.runtime_ms is not None]
        if runtimes:
            with cursor.cursor.copy(
                "COPY reports_taskruntime (task_id, corpus_id, service_id, runtime_ms) FROM STDIN"
            ) as copy:
                for row in runtimes:
                    copy.write_row(row)
    outcome.ingested = len(rows)
    outcome.pairs = {(corpus_id, service_id) for _, corpus_id, service_id, _ in rows}
    return outcome


def runs_close_drained(pairs: set[tuple[int, int]]) -> int:
    """Close the open run of every pair that has no task left in progress (TODO or leased)."""
    from runs.actions import run_close

    if not pairs:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT corpus_id, service_id FROM corpora_taskcount"
            " JOIN unnest(%s::bigint[], %s::bigint[]) AS p(c, s) ON corpus_id = p.c AND service_id = p.s"
            " WHERE bucket IN (0, 1) AND count > 0",
            [[c for c, _ in pairs], [s for _, s in pairs]],
        )
        busy = set(cursor.fetchall())
    return sum(run_close(corpus_id=c, service_id=s) for c, s in pairs - busy)
