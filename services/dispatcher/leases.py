"""Leases: claim TODO tasks for a service, put unsent ones back, and reap the ones that expired."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from django.db import connection, transaction

from services.dispatcher.ingest import runs_close_drained

logger = logging.getLogger(__name__)

NEVER_COMPLETED = ("fatal", "cortex", "never_completed_with_retries")


@dataclass(frozen=True)
class LeasedTask:
    id: int
    corpus_id: int
    service_id: int
    path: Path
    kind: str
    entry: str


def lease_batch(*, service_id: int, limit: int, mark: int, lease_seconds: int) -> list[LeasedTask]:
    """Claim up to `limit` TODO tasks of a service: one statement, rows other dispatchers hold skipped.
    The lease length is captured on each task now, so a later override changes only later leases."""
    if limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH picked AS (
                SELECT id FROM corpora_task
                 WHERE service_id = %(service)s AND status = 0
                 ORDER BY id LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED
            )
            UPDATE corpora_task t
               SET status = %(mark)s, attempts = t.attempts + 1, lease_seconds = %(lease)s,
                   leased_until = now() + make_interval(secs => %(lease)s)
              FROM picked, corpora_document d, corpora_corpus c
             WHERE t.id = picked.id AND d.id = t.document_id AND c.id = t.corpus_id
            RETURNING t.id, t.corpus_id, t.service_id, c.path, d.kind, d.entry
            """,
            {"service": service_id, "limit": limit, "mark": mark, "lease": lease_seconds},
        )
        rows = cursor.fetchall()
    return [LeasedTask(i, c, s, Path(path) / entry, kind, entry) for i, c, s, path, kind, entry in rows]


def lease_release(task_ids: list[int], *, mark: int) -> int:
    """Give back leased tasks that were never sent to a worker: TODO again, the attempt not counted."""
    if not task_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE corpora_task SET status = 0, leased_until = NULL, attempts = GREATEST(attempts - 1, 0)"
            " WHERE id = ANY(%s) AND status = %s",
            [task_ids, mark],
        )
        return cursor.rowcount


def leases_reap(*, max_attempts: int) -> tuple[int, int]:
    """Return expired leases to TODO; a task that used all its attempts becomes fatal with the message
    cortex:never_completed_with_retries. Returns (returned to TODO, made fatal)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE corpora_task
               SET status = CASE WHEN attempts >= %s THEN -4 ELSE 0 END, leased_until = NULL
             WHERE status > 0 AND leased_until < now()
            RETURNING id, corpus_id, service_id, status
            """,
            [max_attempts],
        )
        rows = cursor.fetchall()
        fatal = [(task_id, corpus_id, service_id) for task_id, corpus_id, service_id, status in rows if status == -4]
        if fatal:
            ids = [row[0] for row in fatal]
            cursor.execute("DELETE FROM reports_logmessage WHERE task_id = ANY(%s)", [ids])
            severity, category, what = NEVER_COMPLETED
            cursor.execute(
                "INSERT INTO reports_logmessage"
                " (task_id, corpus_id, service_id, task_status, severity, category, what, details)"
                " SELECT t.id, t.corpus_id, t.service_id, t.status, %s, %s, %s,"
                " 'no result came back after ' || t.attempts || ' attempts'"
                " FROM corpora_task t WHERE t.id = ANY(%s)",
                [severity, category, what, ids],
            )
    if rows:
        logger.info("reaped %d expired leases (%d now fatal)", len(rows), len(fatal))
    return len(rows) - len(fatal), len(fatal)


def leases_invalidate(refused: list[tuple[int, str, str]], *, mark: int) -> set[tuple[int, int]]:
    """Make leased tasks whose entry must not be packed invalid (-5) at once, not retried, each with a
    Fatal:invalid:<what> message; `refused` holds (task id, what, details). Returns the (corpus, service)
    pairs touched; their drained runs are closed in the same transaction, as ingestion does."""
    if not refused:
        return set()
    ids = [task_id for task_id, _, _ in refused]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE corpora_task t SET status = -5, leased_until = NULL FROM unnest(%s::bigint[]) AS v(id)"
            " WHERE t.id = v.id AND t.status = %s RETURNING t.id, t.corpus_id, t.service_id",
            [ids, mark],
        )
        rows = cursor.fetchall()
        if not rows:
            return set()
        cursor.execute("DELETE FROM reports_logmessage WHERE task_id = ANY(%s)", [[row[0] for row in rows]])
        cursor.execute(
            "INSERT INTO reports_logmessage"
            " (task_id, corpus_id, service_id, task_status, severity, category, what, details)"
            " SELECT t.id, t.corpus_id, t.service_id, t.status, 'fatal', 'invalid', v.what, left(v.details, 2000)"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, what, details)"
            " JOIN corpora_task t ON t.id = v.id WHERE t.id = ANY(%s)",
            [ids, [r[1] for r in refused], [r[2] for r in refused], [row[0] for row in rows]],
        )
        pairs = {(corpus_id, service_id) for _, corpus_id, service_id in rows}
        runs_close_drained(pairs)
    logger.info("made %d task(s) invalid: their entries cannot be packed", len(rows))
    return pairs
