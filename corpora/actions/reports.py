"""Actions of the reports app: pause and resume (per pair or fleet-wide), report grain slices (ensure,
clear, refresh, rebuild) and rerun; the operator's ones are journaled. The reports app writes no table of
its own: the statements are corpora's (corpora.task_changes, corpora.grains, corpora.message_store)."""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction

from accounts.actions import journaled
from accounts.choices import Action
from config.api.paging import Page
from config.errors import BadRequest
from config.planner import BULK_SETTINGS
from conversion.choices import COMPLETED
from corpora.choices import RunControlAction
from corpora.grains import grain_slice_rebuild, grains_clear
from corpora.message_store import messages_purge_retired, messages_vacuum
from corpora.models import GrainSlice
from corpora.pairs import run_open, runs_close_drained
from corpora.queries.corpora import Pair, pair_resolve
from corpora.queries.reports import GrainReport, category_report, retired_messages_left, what_report
from corpora.statuses import SEVERITIES, severity_check
from corpora.tables import TASK_COUNT_TABLE
from corpora.task_changes import tasks_pause, tasks_rerun, tasks_resume
from jobs.actions import job_enqueue
from jobs.choices import ACTIVE_STATES, JobKinds
from jobs.models import Job


def _scope(arguments: dict[str, Any]) -> str:
    """The journal's target of a pause or resume: the pair, or nothing when it is every pair."""
    return f"{arguments['corpus_name']}/{arguments['service_name']}" if arguments.get("corpus_name") else ""


@journaled(Action.CONVERSIONS_PAUSE, target=_scope)
def conversions_pause(*, corpus_name: str | None = None, service_name: str | None = None, actor: str) -> int:
    """Block every task in progress (TODO or leased) of a pair, or of all pairs; the dispatcher stops
    handing them out and discards results that still come back for them. Returns how many."""
    return tasks_pause(**_pair_ids(corpus_name, service_name))


@journaled(Action.CONVERSIONS_RESUME, target=_scope)
def conversions_resume(*, corpus_name: str | None = None, service_name: str | None = None, actor: str) -> int:
    """Put every blocked task of a pair, or of all pairs, back to TODO. Returns how many."""
    return tasks_resume(**_pair_ids(corpus_name, service_name))


def run_control(
    *, action: str, actor: str, corpus_name: str | None = None, service_name: str | None = None
) -> dict[str, Any]:
    """Pause or resume a pair (or, without names, every pair): the record both twins serialize with
    RunControlSerializer."""
    scope = {"corpus": corpus_name, "service": service_name, "action": action}
    if action == RunControlAction.PAUSE:
        return {**scope, "blocked": conversions_pause(corpus_name=corpus_name, service_name=service_name, actor=actor)}
    return {**scope, "resumed": conversions_resume(corpus_name=corpus_name, service_name=service_name, actor=actor)}


def _pair_ids(corpus_name: str | None, service_name: str | None) -> dict[str, int | None]:
    """The ids of a named pair, or none for every pair (both names None)."""
    if corpus_name is None:
        return {"corpus_id": None, "service_id": None}
    if service_name is None:
        raise BadRequest("Name a corpus with its service, or neither for every pair.")
    pair = pair_resolve(corpus_name, service_name)
    return {"corpus_id": pair.corpus_id, "service_id": pair.service_id}


# --- grains: ensure, clear, rebuild ------------------------------------------------------------------------


def slice_ensure(*, pair: Pair, severity: str) -> bool:
    """Make sure a report page's (corpus, service, severity) slice is built: True when it is (building it
    now if that fits REPORT_BUILD_BUDGET_MS); else a background build is started and the page says it is
    computing (False)."""
    severity_check(severity)
    if GrainSlice.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id, severity=severity).exists():
        return True
    try:
        grain_slice_rebuild(pair.corpus_id, pair.service_id, severity, timeout_ms=settings.REPORT_BUILD_BUDGET_MS)
        return True
    except OperationalError as exc:
        if "statement timeout" not in str(exc) and "canceling statement" not in str(exc):
            raise
    slice_build_enqueue(corpus_id=pair.corpus_id, service_id=pair.service_id, severity=severity)
    return False


def category_report_read(pair: Pair, severity: str, page: Page) -> GrainReport:
    """GET .../<severity> and its screen: the category report (corpora.queries.reports.category_report), its
    slice ensured first (slice_ensure); `computing` while a background build has it."""
    computing = not slice_ensure(pair=pair, severity=severity)
    return category_report(pair, severity, page, computing=computing)


def what_report_read(pair: Pair, severity: str, category: str, page: Page) -> GrainReport:
    """GET .../<severity>/<category> and its screen: the what report of a category
    (corpora.queries.reports.what_report), its slice ensured first as for category_report_read."""
    computing = not slice_ensure(pair=pair, severity=severity)
    return what_report(pair, severity, category, page, computing=computing)


@journaled(Action.REPORTS_REFRESH_PAIR, target="{corpus_name}/{service_name}")
def pair_refresh(*, corpus_name: str, service_name: str, actor: str) -> dict[str, str | int]:
    """The scope refresh: clear this pair's grains at once (no job)."""
    pair = pair_resolve(corpus_name, service_name)
    cleared = grains_clear([(pair.corpus_id, pair.service_id)])
    return {"corpus": pair.corpus_name, "service": pair.service_name, "cleared_slices": cleared}


@journaled(Action.REPORTS_REFRESH)
def reports_refresh(*, actor: str) -> tuple[Job, bool]:
    """The global refresh an operator asks for: the debounced job that rebuilds every report slice."""
    return job_enqueue(kind="reports_refresh", actor=actor)


def slice_build_enqueue(*, corpus_id: int, service_id: int, severity: str) -> None:
    """Start a background build of one slice unless one is already queued or running."""
    params = {"corpus_id": corpus_id, "service_id": service_id, "severity": severity}
    if not Job.objects.filter(kind=JobKinds.REPORT_SLICE_BUILD, state__in=ACTIVE_STATES, params=params).exists():
        job_enqueue(kind=JobKinds.REPORT_SLICE_BUILD, actor="reports", params=params)


def reports_rebuild_all(*, progress: Any, log: Any) -> dict[str, int]:
    """The global refresh: rebuild every slice of every (corpus, service) pair that has messages."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT corpus_id, service_id FROM {TASK_COUNT_TABLE} WHERE count > 0")
        pairs = cursor.fetchall()
    total = len(pairs) * len(SEVERITIES)
    done = rows = 0
    progress(0, total, "rebuilding report grains")
    for corpus_id, service_id in pairs:
        for severity in SEVERITIES:
            rows += grain_slice_rebuild(corpus_id, service_id, severity)
            done += 1
            progress(done, total, f"corpus {corpus_id} service {service_id} {severity}")
    log(f"rebuilt {done} slices ({rows} grain rows) for {len(pairs)} pairs")
    return {"pairs": len(pairs), "slices": done, "rows": rows}


# --- rerun ---------------------------------------------------------------------------------------


@journaled(Action.REPORTS_RERUN, target="{corpus_name}/{service_name}")
def rerun(
    *,
    corpus_name: str,
    service_name: str,
    actor: str,
    severity: str | None = None,
    category: str | None = None,
    what: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Mark a slice for reprocessing in one transaction: open a new run, retire the old messages and
    delete the runtimes of the tasks in scope, set them TODO, and clear the pair's grains. Beat's purge
    job deletes the retired messages' rows afterwards (corpora.tasks.reports.messages_purge_scheduled)."""
    pair = pair_resolve(corpus_name, service_name)
    if severity is None and (category or what):
        raise BadRequest("category and what narrow a severity: pass severity too.", errors={"severity": ["required"]})
    if what and not category:
        raise BadRequest("what narrows a category: pass category too.", errors={"category": ["required"]})
    if severity is not None:
        statuses, message_severity = severity_check(severity)
    else:
        statuses, message_severity = COMPLETED, None
    with transaction.atomic():
        # First, so that a run still open is frozen with the statuses it produced, not the rerun's TODOs.
        run = run_open(corpus_id=pair.corpus_id, service_id=pair.service_id, owner=actor, description=description)
        count = tasks_rerun(
            corpus_id=pair.corpus_id, service_id=pair.service_id, statuses=statuses, message_severity=message_severity,
            category=category, what=what, bulk_settings=BULK_SETTINGS,
        )  # fmt: skip
        grains_clear([(pair.corpus_id, pair.service_id)])
    runs_close_drained({(pair.corpus_id, pair.service_id)})  # an empty slice leaves nothing to wait for
    return {
        "corpus": pair.corpus_name, "service": pair.service_name, "severity": severity, "category": category,
        "what": what, "tasks": count, "run_id": run.pk,
    }  # fmt: skip


def retired_messages_purge(*, progress: Any, log: Any) -> dict[str, int]:
    """Delete the rows of every retired message (corpora.message_store.messages_retire), a batch per
    transaction, until none are left, then VACUUM the message tables (corpora.message_store.messages_vacuum);
    the reports stopped counting the messages when they were retired."""
    total = retired_messages_left()
    purged = 0
    progress(0, total, f"{total:,} tasks' retired messages to delete")
    while batch := messages_purge_retired():
        purged += batch
        progress(purged, max(total, purged), f"deleted the retired messages of {purged:,} tasks")
    log(f"deleted the retired messages of {purged:,} tasks")
    vacuumed = False
    if purged:
        progress(purged, purged, "vacuuming the message tables")
        began = time.monotonic()
        vacuumed = messages_vacuum()
        if vacuumed:
            log(f"vacuumed the message tables in {time.monotonic() - began:.1f} s")
    return {"tasks": purged, "vacuumed": vacuumed}
