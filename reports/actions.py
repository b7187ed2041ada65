"""Writes on conversions: pause and resume, per (corpus, service) or fleet-wide."""

from __future__ import annotations

from django.db import connection

from corpora.queries import corpus_get
from services.queries import service_get

BLOCKED = -6


def conversions_pause(*, corpus_name: str | None = None, service_name: str | None = None) -> int:
    """Block every task in progress (TODO or leased) of a pair, or of all pairs; the dispatcher stops
    handing them out and discards results that still come back for them. Returns how many."""
    return _update_statuses(
        f"SET status = {BLOCKED}, leased_until = NULL",
        "status >= 0",
        corpus_name=corpus_name,
        service_name=service_name,
    )


def conversions_resume(*, corpus_name: str | None = None, service_name: str | None = None) -> int:
    """Put every blocked task of a pair, or of all pairs, back to TODO. Returns how many."""
    return _update_statuses(
        "SET status = 0", f"status <= {BLOCKED}", corpus_name=corpus_name, service_name=service_name
    )


def _update_statuses(assignment: str, condition: str, *, corpus_name: str | None, service_name: str | None) -> int:
    where, params = [condition], []
    if corpus_name is not None:
        where.append("corpus_id = %s AND service_id = %s")
        params += [corpus_get(corpus_name).pk, service_get(service_name).pk]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE corpora_task {assignment} WHERE {' AND '.join(where)}", params)
        return cursor.rowcount
