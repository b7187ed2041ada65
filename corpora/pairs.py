"""A pair (a service activated on a corpus) and its runs: open and close runs, take snapshots, close
the runs that have drained, and the one deletion cascade of a corpus, a service or a pair.

The task status changes (corpora.task_changes) change tasks and says which pairs it touched; whoever drives it
(activation, rerun, the dispatcher's ingestion, reaping and invalidation) closes their drained runs here,
in the same transaction. History is append-only over the API: only the deletion of a corpus or service
and the human `prune_history` (corpora.actions.history.history_prune) remove runs and snapshots.

A run records how its tasks were converted: the service's converter profile when it opened (in full and as
a hash), every profile hash the service had while it was open (a change of profile is noted by the
services action that makes it), and the versions of the profile's engine that the fleet's heartbeats
reported meanwhile (noted by the dispatcher).
"""

# ruff: noqa: S608  (statements are fixed text and status constants; values are parameters)
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F, Func, Value

from config.api.deletions import Deleted
from config.planner import BULK_SETTINGS
from conversion.choices import COMPLETED, TROUBLE_FROM, Severity
from conversion.profiles import profile_load
from corpora.choices import ClassLevel
from corpora.models import MEMBERS_CHUNK, Run
from corpora.queries.corpora import package_tallies_sql, pair_counts, retired_messages_exist, taskdiff_share
from corpora.results import results_discard
from corpora.statuses import BUSY_BUCKETS, infrastructure_class_sql
from corpora.tables import (
    ACTIVATION_TABLE,
    CORPUS_TABLE,
    DOCUMENT_TABLE,
    EXPERIMENT_TABLE,
    EXPERIMENT_VARIANT_TABLE,
    MESSAGE_CLASS_TABLE,
    MESSAGE_TALLY_TABLE,
    RUN_TABLE,
    SNAPSHOT_CLASS_TABLE,
    SNAPSHOT_DIFF_TABLE,
    SNAPSHOT_MEMBERS_TABLE,
    SNAPSHOT_PACKAGE_TABLE,
    SNAPSHOT_TABLE,
    STALE_MESSAGES_TABLE,
    TASK_CLASS_TABLE,
    TASK_COUNT_TABLE,
    TASK_DIFF_TABLE,
    TASK_PACKAGE_TABLE,
    TASK_TABLE,
    TELEMETRY_BIN_TABLE,
    TELEMETRY_MINUTE_TABLE,
)
from corpora.task_changes import tasks_purge
from corpora.telemetry import telemetry_delete, telemetry_trim
from services.models import Service

# --- runs and snapshots --------------------------------------------------------------------------


def run_open(*, corpus_id: int, service_id: int, owner: str, description: str = "") -> Run:
    """Close the pair's open run (if any, frozen with its snapshot) and open a new one; at most one is
    open per pair. Call it before changing the tasks, so that the closed run keeps what it saw. The
    telemetry of the pair's runs before the one just closed goes (corpora.telemetry.telemetry_trim)."""
    with transaction.atomic(), connection.cursor() as cursor:
        run_close(corpus_id=corpus_id, service_id=service_id)
        telemetry_trim(cursor, corpus_id=corpus_id, service_id=service_id)
        profile = profile_load(Service.objects.values_list("profile", flat=True).get(pk=service_id))
        return Run.objects.create(
            corpus_id=corpus_id, service_id=service_id, owner=owner, description=description, engine=profile.engine,
            profile=profile.as_json(), profile_hash=profile.digest, profile_hashes=[profile.digest],
        )  # fmt: skip


# At most this many engine versions are kept on a run: a fleet that reports more is not one fleet.
RUN_ENGINE_VERSIONS_MAX = 16


def runs_profile_note(*, service_id: int, profile_hash: str) -> int:
    """Note a new profile of a service on its open runs (their `profile_hashes`, in the order they came);
    returns how many runs had not seen it yet."""
    return (
        Run.objects.filter(service_id=service_id, finished_at__isnull=True)
        .exclude(profile_hashes__contains=[profile_hash])
        .update(profile_hashes=Func(F("profile_hashes"), Value(profile_hash), function="array_append"))
    )


def runs_engine_versions_note(versions: dict[int, set[str]]) -> int:
    """Add the engine versions workers reported for each service (service id -> versions) to the service's
    open runs, in one statement, each run's versions kept sorted and distinct; returns the runs changed."""
    pairs = [(service_id, version) for service_id, given in versions.items() for version in given]
    if not pairs:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {RUN_TABLE} r SET engine_versions = ARRAY("
            "  SELECT DISTINCT v FROM unnest(r.engine_versions || n.versions) v ORDER BY v"
            f"  LIMIT {RUN_ENGINE_VERSIONS_MAX})"
            " FROM (SELECT s AS service_id, array_agg(DISTINCT v)::varchar(200)[] AS versions"
            "        FROM unnest(%s::bigint[], %s::text[]) AS p(s, v) GROUP BY s) n"
            " WHERE r.service_id = n.service_id AND r.finished_at IS NULL AND NOT r.engine_versions @> n.versions"
            f" AND cardinality(r.engine_versions) < {RUN_ENGINE_VERSIONS_MAX}",
            [[service_id for service_id, _ in pairs], [version for _, version in pairs]],
        )
        return int(cursor.rowcount)


def run_close(*, corpus_id: int, service_id: int) -> int:
    """Close the pair's open run: freeze its per-status tallies and its end, and snapshot every task's
    status at that moment. Returns the number of runs closed (0 or 1)."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update()
            .filter(corpus_id=corpus_id, service_id=service_id, finished_at__isnull=True)
            .only("pk")
            .first()
        )
        if run is None:
            return 0
        snapshot = snapshot_take(corpus_id=corpus_id, service_id=service_id)
        Run.objects.filter(pk=run.pk).update(
            finished_at=snapshot.taken_at,
            tallies=pair_counts(corpus_id, service_id),
            snapshot_id=snapshot.snapshot_id,
        )
    return 1


def runs_close_drained(pairs: set[tuple[int, int]]) -> int:
    """Close the open run of every pair that has no task left TODO, leased or blocked (a paused run stays
    open); each close freezes the run's tallies and snapshots its tasks (run_close)."""
    if not pairs:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT corpus_id, service_id FROM {TASK_COUNT_TABLE}"
            " JOIN unnest(%s::bigint[], %s::bigint[]) AS p(c, s) ON corpus_id = p.c AND service_id = p.s"
            f" WHERE bucket IN ({', '.join(map(str, BUSY_BUCKETS))}) AND count > 0",
            [[c for c, _ in pairs], [s for _, s in pairs]],
        )
        busy = set(cursor.fetchall())
    return sum(run_close(corpus_id=c, service_id=s) for c, s in pairs - busy)


# The severities whose classes a snapshot lists the documents of.
MEMBER_SEVERITIES = (Severity.WARNING, Severity.ERROR, Severity.FATAL)


def snapshot_packages_sql(corpus_id: int, service_id: int, retired: str) -> tuple[str, list[Any]]:
    """The statement that freezes a pair's packages in the snapshot given as its first parameter, and its
    other parameters: every package of the pair's package tallies (corpora.queries.corpora.package_tallies_sql)
    with its tallies, the tasks per (flags, status), and the papers that show trouble with it (flags from
    TROUBLE_FROM up: missing, errors in its definitions, weak) with their statuses and flags, from the
    package rows' partial index, both read in the same statement, so from the same rows. The papers that
    merely loaded a package are most of the rows at arXiv's size and are not frozen
    (docs/decisions/package-attribution.md). `retired` leaves out the tasks whose messages a rerun retired."""
    tallies, params = package_tallies_sql(corpus_id, service_id)
    return (
        f"INSERT INTO {SNAPSHOT_PACKAGE_TABLE} (snapshot_id, kind, package, document_ids, statuses, flags,"
        " tally_flags, tally_statuses, tally_tasks)"
        " SELECT %s, t.kind, t.package, coalesce(a.document_ids, '{}'), coalesce(a.statuses, '{}'),"
        " coalesce(a.flags, '{}'), t.f, t.s, t.n FROM ("
        "  SELECT x.kind, x.package, array_agg(x.flags ORDER BY x.flags, x.task_status) AS f,"
        "   array_agg(x.task_status ORDER BY x.flags, x.task_status) AS s,"
        "   array_agg(x.tasks::integer ORDER BY x.flags, x.task_status) AS n"
        f"  FROM ({tallies}) x GROUP BY x.kind, x.package) t"
        " LEFT JOIN ("
        "  SELECT p.kind, p.package, array_agg(p.document_id ORDER BY p.document_id) AS document_ids,"
        "   array_agg(p.task_status ORDER BY p.document_id) AS statuses,"
        "   array_agg(p.flags ORDER BY p.document_id) AS flags"
        f"  FROM {TASK_PACKAGE_TABLE} p WHERE p.corpus_id = %s AND p.service_id = %s"
        f"  AND p.flags >= {TROUBLE_FROM}{retired} GROUP BY p.kind, p.package) a"
        " ON a.kind = t.kind AND a.package = t.package"
    ), [*params, corpus_id, service_id]


@dataclass(frozen=True)
class SnapshotTaken:
    snapshot_id: int
    taken_at: datetime
    rows: int


def snapshot_take(*, corpus_id: int, service_id: int) -> SnapshotTaken:
    """Append the status of every task of the pair as one snapshot, with its message classes: the tasks
    and messages of each class (from the reports' tallies) and the documents that had each class of
    warning severity or worse (from the (task, class) rows), in chunks of document ids, and the documents
    whose task is an infrastructure failure (from the same rows). Retired messages
    (a rerun's, not yet purged) count nowhere, as in the reports. The packages the tasks used are frozen
    with it, each with its tallies and the papers that showed trouble with it (snapshot_packages_sql). One
    transaction."""
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in BULK_SETTINGS:
            cursor.execute(statement)
        retired = ""
        if retired_messages_exist(corpus_id, service_id):
            retired = f" AND NOT EXISTS (SELECT FROM {STALE_MESSAGES_TABLE} z WHERE z.task_id = p.task_id)"
        # The infrastructure failures' documents: a few ranges of the report index, one per completed status
        # and infrastructure class (found by the class dictionary's key), read from the index alone.
        infrastructure = (
            "SELECT coalesce(array_agg(DISTINCT p.document_id ORDER BY p.document_id), '{}')"
            f" FROM {TASK_CLASS_TABLE} p"
            " WHERE p.corpus_id = %s AND p.service_id = %s AND p.task_status = ANY(%s)"
            f" AND p.message_class_id = ANY(ARRAY(SELECT k.id FROM {MESSAGE_CLASS_TABLE} k"
            f"  WHERE k.level = {ClassLevel.CLASS} AND {infrastructure_class_sql('k')})){retired}"
        )
        cursor.execute(
            f"INSERT INTO {SNAPSHOT_TABLE} (corpus_id, service_id, taken_at, tasks, document_ids, statuses,"
            " with_classes, infrastructure_document_ids)"
            " SELECT %s, %s, clock_timestamp(), count(*),"
            "  coalesce(array_agg(document_id ORDER BY document_id), '{}'),"
            f"  coalesce(array_agg(ccs_status_bucket(status)::smallint ORDER BY document_id), '{{}}'), true,"
            f"  ({infrastructure})"
            f" FROM {TASK_TABLE} WHERE corpus_id = %s AND service_id = %s"
            " RETURNING id, taken_at, tasks",
            [corpus_id, service_id, corpus_id, service_id, list(COMPLETED), corpus_id, service_id],
        )
        snapshot_id, taken_at, rows = cursor.fetchone()
        cursor.execute(
            f"INSERT INTO {SNAPSHOT_CLASS_TABLE} (snapshot_id, message_class_id, tasks, messages)"
            f" SELECT %s, t.message_class_id, sum(t.tasks), sum(t.messages) FROM {MESSAGE_TALLY_TABLE} t"
            f" JOIN {MESSAGE_CLASS_TABLE} c ON c.id = t.message_class_id AND c.level = {ClassLevel.CLASS}"
            " WHERE t.corpus_id = %s AND t.service_id = %s GROUP BY t.message_class_id HAVING sum(t.tasks) > 0",
            [snapshot_id, corpus_id, service_id],
        )
        # Each class's documents in one ascending array, cut after every member whose hash is 0 modulo
        # MEMBERS_CHUNK (and after the last): each piece is a row from its first document to its last.
        # The documents come from the report index alone (it includes them), one range per (status,
        # class) that the tallies count: no join of the (task, class) rows to the tasks.
        cursor.execute(
            f"INSERT INTO {SNAPSHOT_MEMBERS_TABLE} (snapshot_id, message_class_id, lo, hi, document_ids)"
            " WITH m AS MATERIALIZED ("
            "  SELECT p.message_class_id AS c, array_agg(p.document_id ORDER BY p.document_id) AS a"
            f"  FROM {MESSAGE_TALLY_TABLE} x"
            f"  JOIN {MESSAGE_CLASS_TABLE} k ON k.id = x.message_class_id AND k.level = {ClassLevel.CLASS}"
            " AND k.severity = ANY(%s)"
            f"  JOIN {TASK_CLASS_TABLE} p ON p.corpus_id = x.corpus_id AND p.service_id = x.service_id"
            "   AND p.task_status = x.task_status AND p.message_class_id = x.message_class_id"
            f"  WHERE x.corpus_id = %s AND x.service_id = %s AND x.tasks > 0{retired} GROUP BY 1)"
            " SELECT %s, m.c, m.a[s.hi - s.size + 1], m.a[s.hi], m.a[s.hi - s.size + 1 : s.hi] FROM m,"
            "  LATERAL (SELECT e.i AS hi, e.i - coalesce(lag(e.i) OVER (ORDER BY e.i), 0) AS size FROM ("
            "   SELECT u.i FROM unnest(m.a) WITH ORDINALITY AS u(d, i)"
            f"   WHERE (hashint8(u.d) & {MEMBERS_CHUNK - 1}) = 0 AND u.i < cardinality(m.a)"
            "   UNION ALL SELECT cardinality(m.a)) e) s",
            [list(MEMBER_SEVERITIES), corpus_id, service_id, snapshot_id],
        )
        statement, params = snapshot_packages_sql(corpus_id, service_id, retired)
        cursor.execute(statement, [snapshot_id, *params])
    return SnapshotTaken(snapshot_id, taken_at, rows)


# --- the deletion cascade ------------------------------------------------------------------------


def data_purge(*, corpus_id: int | None = None, service_id: int | None = None, actor: str) -> Deleted:
    """Delete what a corpus, a service (in every corpus) or one pair holds, set-based in one transaction,
    then its result archives once that commits (corpora.results.results_discard):
    - a pair: its run is closed first (the run and its snapshot stay as history), then its tasks with
      their messages, runtimes, counts and report grains, and its activation;
    - a corpus: the same for every service on it, its runs, snapshots and their diffs, its documents and
      the corpus itself;
    - a service: the same in every corpus; its workers and the service itself are its caller's to delete
      (services.actions.service_delete), in the same transaction.
    Returns what went (config.api.deletions.Deleted; documents for a corpus only). A caller checks
    what may be deleted first; a foreign key that still points here (a sandbox carved meanwhile from a
    corpus) raises IntegrityError and nothing is deleted."""
    named = (("corpus_id", corpus_id), ("service_id", service_id))
    scope = [(column, value) for column, value in named if value is not None]
    if not scope:
        raise ValueError("name a corpus, a service or both")
    where = " AND ".join(f"{column} = %s" for column, _ in scope)
    params = [value for _, value in scope]
    documents: int | None = None
    with transaction.atomic(), connection.cursor() as cursor:
        if corpus_id is not None and service_id is not None:
            run_close(corpus_id=corpus_id, service_id=service_id)  # frozen with its snapshot before the purge
        counts = tasks_purge(corpus_id=corpus_id, service_id=service_id)
        cursor.execute(f"DELETE FROM {ACTIVATION_TABLE} WHERE {where}", params)
        if len(scope) == 1:
            _history_delete(cursor, *scope[0])
            _experiments_unlink(cursor, *scope[0])
        if corpus_id is not None and service_id is None:
            cursor.execute(f"DELETE FROM {DOCUMENT_TABLE} WHERE corpus_id = %s", [corpus_id])
            documents = cursor.rowcount
            cursor.execute(f"DELETE FROM {CORPUS_TABLE} WHERE id = %s", [corpus_id])
    discarded = results_discard(corpus_id=corpus_id, service_id=service_id, actor=actor)
    return Deleted(
        messages=counts["messages"], tasks=counts["tasks"], result_files=discarded.files,
        result_files_job=discarded.job_uuid, documents=documents,
    )  # fmt: skip


def _experiments_unlink(cursor: CursorWrapper, column: str, value: int) -> None:
    """The experiments and variants that name a corpus (as their pair's corpus or as their sandbox) or a
    service that is being deleted keep their names and lose the reference: they stay in the history."""
    if column == "corpus_id":
        cursor.execute(f"UPDATE {EXPERIMENT_TABLE} SET corpus_id = NULL WHERE corpus_id = %s", [value])
        cursor.execute(f"UPDATE {EXPERIMENT_TABLE} SET sandbox_id = NULL WHERE sandbox_id = %s", [value])
    else:
        cursor.execute(f"UPDATE {EXPERIMENT_TABLE} SET service_id = NULL WHERE service_id = %s", [value])
        cursor.execute(f"UPDATE {EXPERIMENT_VARIANT_TABLE} SET service_id = NULL WHERE service_id = %s", [value])


def _history_delete(cursor: CursorWrapper, column: str, value: int) -> None:
    """The runs, snapshots (with their classes) and snapshot diffs (corpora.models, derived from the snapshots)
    of a corpus or a service that is itself being deleted (both snapshots of a diff belong to the same pair)."""
    diffs = (
        f"SELECT d.id FROM {SNAPSHOT_DIFF_TABLE} d JOIN {SNAPSHOT_TABLE} s ON s.id = d.previous_id"
        f" WHERE s.{column} = %s"
    )
    cursor.execute(f"DELETE FROM {TASK_DIFF_TABLE} WHERE diff_id IN ({diffs})", [value])
    cursor.execute(f"DELETE FROM {SNAPSHOT_DIFF_TABLE} WHERE id IN ({diffs})", [value])
    telemetry_delete(cursor, f"SELECT id FROM {RUN_TABLE} WHERE {column} = %s", [value])
    cursor.execute(f"DELETE FROM {RUN_TABLE} WHERE {column} = %s", [value])
    snapshots = f"SELECT id FROM {SNAPSHOT_TABLE} WHERE {column} = %s"
    cursor.execute(f"DELETE FROM {SNAPSHOT_MEMBERS_TABLE} WHERE snapshot_id IN ({snapshots})", [value])
    cursor.execute(f"DELETE FROM {SNAPSHOT_CLASS_TABLE} WHERE snapshot_id IN ({snapshots})", [value])
    cursor.execute(f"DELETE FROM {SNAPSHOT_PACKAGE_TABLE} WHERE snapshot_id IN ({snapshots})", [value])
    cursor.execute(f"DELETE FROM {SNAPSHOT_TABLE} WHERE {column} = %s", [value])


# --- history pruning -----------------------------------------------------------------------------


def history_remove(
    *, snapshots: tuple[str, list[Any]], runs: tuple[str, list[Any]]
) -> tuple[dict[tuple[int, int], dict[str, int]], tuple[int, int]]:
    """Remove, in one transaction, the snapshots `snapshots` selects (a statement of their ids and its
    parameters) with their diffs (and diff rows), members and classes, and the runs `runs` selects (a WHERE
    on `r` and its parameters) with their telemetry; a kept run that pointed at a removed snapshot loses
    its link. Returns what went per (corpus, service) pair (runs, snapshots, diffs, diff_rows, bytes; as
    history_tally counts them) and the diff rows' table size and row count read before the delete
    (corpora.queries.corpora.taskdiff_share)."""
    snapshot_sql, snapshot_params = snapshots
    run_sql, run_params = runs
    pairs: dict[tuple[int, int], dict[str, int]] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # Locked first: a diff being computed on one of them waits for this prune, then finds it gone.
        cursor.execute(f"{snapshot_sql} FOR UPDATE OF s", snapshot_params)
        snapshot_ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            f"SELECT id FROM {SNAPSHOT_DIFF_TABLE} WHERE previous_id = ANY(%s) OR current_id = ANY(%s)",
            [snapshot_ids, snapshot_ids],
        )
        diff_ids = [row[0] for row in cursor.fetchall()]
        share = taskdiff_share()  # before the delete, as the preview reads it
        cursor.execute(
            f"WITH gone AS (DELETE FROM {TASK_DIFF_TABLE} WHERE diff_id = ANY(%s) RETURNING diff_id)"
            " SELECT p.corpus_id, p.service_id, count(*) FROM gone"
            f" JOIN {SNAPSHOT_DIFF_TABLE} d ON d.id = gone.diff_id JOIN {SNAPSHOT_TABLE} p ON p.id = d.previous_id"
            " GROUP BY 1, 2",
            [diff_ids],
        )
        history_tally(pairs, cursor.fetchall(), "diff_rows")
        cursor.execute(
            f"WITH gone AS (DELETE FROM {SNAPSHOT_DIFF_TABLE} WHERE id = ANY(%s)"
            "  RETURNING previous_id, pg_column_size(matrix) AS bytes)"
            " SELECT p.corpus_id, p.service_id, count(*), sum(gone.bytes) FROM gone"
            f" JOIN {SNAPSHOT_TABLE} p ON p.id = gone.previous_id GROUP BY 1, 2",
            [diff_ids],
        )
        history_tally(pairs, cursor.fetchall(), "diffs", "bytes")
        for table in (TELEMETRY_BIN_TABLE, TELEMETRY_MINUTE_TABLE):  # the runs' telemetry (corpora.telemetry)
            gone = f"DELETE FROM {table} WHERE run_id IN (SELECT r.id FROM {RUN_TABLE} r WHERE {run_sql})"
            cursor.execute(gone, run_params)
        cursor.execute(
            f"WITH gone AS (DELETE FROM {RUN_TABLE} r WHERE {run_sql} RETURNING r.corpus_id, r.service_id)"
            " SELECT corpus_id, service_id, count(*) FROM gone GROUP BY 1, 2",
            run_params,
        )
        history_tally(pairs, cursor.fetchall(), "runs")
        cursor.execute(f"UPDATE {RUN_TABLE} SET snapshot_id = NULL WHERE snapshot_id = ANY(%s)", [snapshot_ids])
        cursor.execute(
            f"WITH gone AS (DELETE FROM {SNAPSHOT_MEMBERS_TABLE} WHERE snapshot_id = ANY(%s)"
            "  RETURNING snapshot_id, pg_column_size(document_ids) AS bytes)"
            " SELECT s.corpus_id, s.service_id, sum(gone.bytes) FROM gone"
            f" JOIN {SNAPSHOT_TABLE} s ON s.id = gone.snapshot_id GROUP BY 1, 2",
            [snapshot_ids],
        )
        history_tally(pairs, cursor.fetchall(), "bytes")
        cursor.execute(f"DELETE FROM {SNAPSHOT_CLASS_TABLE} WHERE snapshot_id = ANY(%s)", [snapshot_ids])
        cursor.execute(f"DELETE FROM {SNAPSHOT_PACKAGE_TABLE} WHERE snapshot_id = ANY(%s)", [snapshot_ids])
        cursor.execute(
            f"WITH gone AS (DELETE FROM {SNAPSHOT_TABLE} WHERE id = ANY(%s)"
            "  RETURNING corpus_id, service_id, pg_column_size(document_ids) + pg_column_size(statuses) AS bytes)"
            " SELECT corpus_id, service_id, count(*), sum(bytes) FROM gone GROUP BY 1, 2",
            [snapshot_ids],
        )
        history_tally(pairs, cursor.fetchall(), "snapshots", "bytes")
    return pairs, share


def history_tally(pairs: dict[tuple[int, int], dict[str, int]], rows: list[tuple[Any, ...]], *keys: str) -> None:
    """Add rows of (corpus_id, service_id, value for each key) to the per-pair counts."""
    for corpus_id, service_id, *values in rows:
        counts = pairs.setdefault((corpus_id, service_id), {})
        for key, value in zip(keys, values, strict=True):
            counts[key] = counts.get(key, 0) + int(value or 0)
