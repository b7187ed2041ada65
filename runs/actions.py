"""Writes on runs: open one for a (corpus, service) pair, close it."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from runs.models import Run


def run_open(*, corpus_id: int, service_id: int, owner: str, description: str = "") -> Run:
    """Close the pair's open run (if any) and open a new one; at most one is open per pair."""
    run_close(corpus_id=corpus_id, service_id=service_id)
    return Run.objects.create(corpus_id=corpus_id, service_id=service_id, owner=owner, description=description)


def run_close(*, corpus_id: int, service_id: int) -> int:
    return Run.objects.filter(corpus_id=corpus_id, service_id=service_id, finished_at__isnull=True).update(
        finished_at=timezone.now()
    )


def runs_delete_for(*, corpus_id: int | None = None, service_id: int | None = None) -> None:
    """Remove the runs of a corpus or a service that is itself being deleted."""
    column, value = ("corpus_id", corpus_id) if corpus_id is not None else ("service_id", service_id)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM runs_run WHERE {column} = %s", [value])  # noqa: S608
