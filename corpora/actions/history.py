"""Actions of the runs app: append a snapshot on request, have diffs of snapshots computed, remove history.

The runs app writes no table of its own: runs, snapshots and their diffs are corpora's, which writes
them (corpora.pairs, corpora.actions.diffs). History is append-only over the API: a snapshot appended, a diff
computed once; only the deletion of a corpus or service (corpora.pairs.data_purge) and the human
`prune_history` (history_prune, here, through corpora.pairs.history_remove) remove any of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Unpack

from accounts.actions import journal_note, journaled
from accounts.choices import Action
from config.api.paging import Page
from config.errors import NotFound
from corpora.actions.diffs import diff_ensure, diff_rows_ensure
from corpora.models import Activation
from corpora.pairs import history_remove, snapshot_take
from corpora.queries.corpora import pair_resolve
from corpora.queries.diffs import DiffScope, RunDiff, TaskDiffFilters, TaskDiffRow, run_diff, task_diffs
from corpora.queries.prune import (
    PruneScope,
    PruneSummary,
    prune_runs_sql,
    prune_scope,
    prune_snapshots_sql,
    prune_summary,
)


@dataclass(frozen=True)
class SnapshotAppended:
    """A snapshot appended on request (SnapshotAckSerializer): its pair, its date and the rows it holds."""

    corpus: str
    service: str
    taken_at: datetime
    rows: int


@journaled(Action.RUNS_SNAPSHOT, target="{corpus_name}/{service_name}")
def snapshot_append(*, corpus_name: str, service_name: str, actor: str) -> SnapshotAppended:
    """POST .../snapshot: the current statuses of an activated pair as one new snapshot."""
    pair = pair_resolve(corpus_name, service_name)
    if not Activation.objects.filter(corpus_id=pair.corpus_id, service_id=pair.service_id).exists():
        raise NotFound(f"The service {service_name!r} is not active on the corpus {corpus_name!r}.")
    taken = snapshot_take(corpus_id=pair.corpus_id, service_id=pair.service_id)
    return SnapshotAppended(pair.corpus_name, pair.service_name, taken_at=taken.taken_at, rows=taken.rows)


def diff_ready(previous_id: int | None, current_id: int | None, *, rows: bool = False) -> int | None:
    """The diff of a scope's two snapshots (corpora.queries.diffs.diff_scope), made if needed, with its changed
    documents' rows too when `rows` (task lists); None without two snapshots."""
    if previous_id is None or current_id is None:
        return None
    diff_id = diff_ensure(previous_id=previous_id, current_id=current_id)
    if rows:
        diff_rows_ensure(diff_id)
    return diff_id


def diff_read(scope: DiffScope, *, exclude_infrastructure: bool = False) -> tuple[int | None, RunDiff]:
    """GET .../diff and the screens that show a diff: the diff of the scope's two snapshots, made if
    needed, and its record (corpora.queries.diffs.run_diff). The id is what task_diff_count reads."""
    diff_id = diff_ready(scope.previous.id if scope.previous else None, scope.current.id if scope.current else None)
    return diff_id, run_diff(scope, diff_id, exclude_infrastructure=exclude_infrastructure)


def task_diffs_read(scope: DiffScope, page: Page, **filters: Unpack[TaskDiffFilters]) -> list[TaskDiffRow]:
    """GET .../tasks and the screens that list changed documents: a page of them
    (corpora.queries.diffs.task_diffs), the diff and its changed documents' rows made first if needed."""
    diff_id = diff_ready(
        scope.previous.id if scope.previous else None, scope.current.id if scope.current else None, rows=True
    )
    return task_diffs(scope, diff_id, page, **filters)


@journaled(Action.RUNS_PRUNE, target=lambda a: f"{a.get('corpus') or '*'}/{a.get('service') or '*'}")
def history_prune(
    *, before: datetime, corpus: str | None = None, service: str | None = None, actor: str
) -> PruneSummary:
    """Remove the history corpora.queries.prune.prune_preview shows for the same arguments, in one transaction:
    the diff rows and diffs of the removed snapshots, the finished runs, then the snapshots (a kept run
    that pointed at one loses its link). Returns what was removed, in the preview's shape; journaled."""
    scope = prune_scope(before, corpus, service)
    summary = _prune(scope)
    journal_note(removed=asdict(summary.total), pairs=[f"{p.corpus}/{p.service}" for p in summary.pairs])
    return summary


def _prune(scope: PruneScope) -> PruneSummary:
    snapshots = prune_snapshots_sql(scope)
    runs = prune_runs_sql(scope)
    pairs, share = history_remove(snapshots=snapshots, runs=runs)
    # The diffs' taskdiff share is added from the diff-row counts, as in the preview.
    return prune_summary(scope, pairs, share)
