# ruff: noqa: S608  (the SQL here is assembled from this module's own constants, never from input)
"""Generated data for the runs benchmark, built set-based in SQL and reused by later runs.

Shape, for `documents` documents (default 1,000,000; a multiple of 100 so every share below is exact):
one ready corpus, its documents, and two services activated on it, each with one completed task per
document. Service A's status follows r = (37 * i) mod 100 of the document's index i:

    r < 30 no_problem (-1), < 65 warning (-2), < 90 error (-3), < 98 fatal (-4), else invalid (-5);

service B has A's status except on the documents with (13 * i + 7) mod 100 < B_DIFFER_PERCENT, where
it has the next one in the cycle no_problem -> warning -> error -> fatal -> invalid -> no_problem.

Snapshots to diff are derived from a real one (corpora.pairs.snapshot_take) in SQL (`snapshot_derived`):
the same documents with the status of the k-th document moved one step along that cycle where
(7919 * k) mod 100 < the percentage changed, or only the first documents of it (a snapshot taken before
an extend added the rest). History (`history_generate`): runs with frozen tallies and a small snapshot
each on corpora of their own, a few of them open. The runs tables are emptied at the start of every
benchmark run (`runs_truncate`), so that the size of a snapshot is measured on an empty table.
"""

from __future__ import annotations

import json
import time

import harness

CORPUS = "bench-runs"
SERVICE_A = "tex_to_html"
SERVICE_B = "tex_to_html_next"
B_DIFFER_PERCENT = 20
HISTORY_PREFIX = "bench-runs-h"
HISTORY_CORPORA = 20
# One run in this many is on the busiest pair of the history, history_pair(0, SERVICE_A).
HISTORY_BIG_PAIR_SHARE = 5
HISTORY_OPEN = 5  # runs left open, on the last pairs, newest of all

STATUS_OF_R = "CASE WHEN {r} < 30 THEN -1 WHEN {r} < 65 THEN -2 WHEN {r} < 90 THEN -3 WHEN {r} < 98 THEN -4 ELSE -5 END"
NEXT_STATUS = "CASE {s} WHEN -5 THEN -1 ELSE {s} - 1 END"
CHANGE_MULTIPLIER = 7919  # coprime with 100: exactly `percent` of every 100 consecutive positions change

META = "CREATE TABLE IF NOT EXISTS bench_runs_meta (key text PRIMARY KEY, value jsonb NOT NULL)"


def generated_state() -> dict | None:
    """The meta row of a complete earlier build, or None."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(META)
        cursor.execute("SELECT value FROM bench_runs_meta WHERE key = 'complete'")
        row = cursor.fetchone()
    if not row:
        return None
    return json.loads(row[0]) if isinstance(row[0], str) else row[0]


def leftovers_remove() -> None:
    """Remove a partial build or one of another size (the corpus, with triggers off) and its meta row."""
    from django.db import connection

    runs_truncate()
    harness.corpus_purge_unchecked(CORPUS)
    with connection.cursor() as cursor:
        cursor.execute(META)
        cursor.execute("DELETE FROM bench_runs_meta")


def services_ensure(actor: str) -> tuple[int, int]:
    from services.actions import service_register
    from services.models import Service

    ids = []
    for name in (SERVICE_A, SERVICE_B):
        service = Service.objects.filter(name=name).first() or service_register(
            name=name, actor=actor, description="runs benchmark service"
        )
        ids.append(service.pk)
    return ids[0], ids[1]


def data_generate(documents: int, actor: str) -> dict[str, float]:
    """Build the corpus, its documents and both services' tasks in an empty benchmark database."""
    from django.db import connection, transaction

    if documents % 100:
        raise ValueError("documents must be a multiple of 100")
    steps: dict[str, float] = {}

    def step(name: str, started: float) -> None:
        steps[name] = time.perf_counter() - started
        print(f"  {name:<34} {steps[name]:7.1f} s", flush=True)

    a_id, b_id = services_ensure(actor)
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        corpus_id = harness.corpus_insert(
            cursor,
            name=CORPUS,
            description="runs benchmark",
            service_ids=[a_id, b_id],
            actor=actor,
            documents=documents,
            prefix="r",
            digits=7,
        )
    step("corpus, documents", began)

    began = time.perf_counter()
    index = "substr(d.name, 2)::int"
    status_a = STATUS_OF_R.format(r=f"mod(37 * {index}, 100)")
    status_b = (
        f"CASE WHEN mod(13 * {index} + 7, 100) < {B_DIFFER_PERCENT} THEN {NEXT_STATUS.format(s=status_a)}"
        f" ELSE {status_a} END"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # One statement per service, so the statement-level triggers fill corpora_taskcount.
        for service_id, status in ((a_id, status_a), (b_id, status_b)):
            cursor.execute(
                "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
                f" SELECT %s, %s, d.id, {status} FROM corpora_document d WHERE d.corpus_id = %s ORDER BY d.id",
                [corpus_id, service_id, corpus_id],
            )
    step("tasks (2 x documents)", began)

    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_document, corpora_task, corpora_taskcount")
    step("vacuum analyze", began)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_runs_meta (key, value) VALUES ('complete', jsonb_build_object("
            "'documents', %s::int, 'steps', %s::jsonb))",
            [documents, json.dumps(steps)],
        )
    return steps


def runs_truncate() -> None:
    """Empty the runs tables (the benchmark database is this script's alone)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE corpora_taskdiff, corpora_snapshotdiff, corpora_run, corpora_snapshot")


def snapshot_derived(base_id: int, *, changed_percent: int, keep: int | None = None) -> tuple[int, object]:
    """A new snapshot of the base's pair, taken now: the base's first `keep` documents (all by default),
    with `changed_percent` of their statuses moved one step along the cycle. Returns (id, taken_at)."""
    from django.db import connection, transaction

    moved = NEXT_STATUS.format(s="u.s")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL work_mem = '256MB'")
        cursor.execute(
            "INSERT INTO corpora_snapshot (corpus_id, service_id, taken_at, tasks, document_ids, statuses)"
            " SELECT b.corpus_id, b.service_id, clock_timestamp(), n.n, b.document_ids[1:n.n],"
            "  (SELECT array_agg(CASE WHEN mod(u.k * %s, 100) < %s THEN " + moved + " ELSE u.s END::smallint"
            "    ORDER BY u.k) FROM unnest(b.statuses[1:n.n]) WITH ORDINALITY AS u(s, k))"
            " FROM corpora_snapshot b, LATERAL (SELECT coalesce(%s, b.tasks) AS n) n WHERE b.id = %s"
            " RETURNING id, taken_at",
            [CHANGE_MULTIPLIER, changed_percent, keep, base_id],
        )
        return cursor.fetchone()


def changed_expected(kept: int, total: int, percent: int) -> int:
    """Documents whose status differs between a snapshot of the first `kept` of `total` documents and
    one of all of them with `percent` changed (snapshot_derived): the changed ones plus the new ones."""
    moved = sum(1 for k in range(1, kept + 1) if (k * CHANGE_MULTIPLIER) % 100 < percent)
    return moved + (total - kept)


def history_generate(runs: int, service_ids: tuple[int, int], actor: str) -> dict[str, int]:
    """`runs` runs an hour apart on HISTORY_CORPORA corpora x both services: one run in
    HISTORY_BIG_PAIR_SHARE on the busiest pair (history_pair(0, A)), the others in turn on the other
    pairs; each closed run with frozen tallies and a snapshot of 10 documents taken at its end, the newest
    run of the HISTORY_OPEN pairs run on last left open. Set-based; returns the counts made."""
    from django.db import connection, transaction

    tallies = (
        "jsonb_build_object('total', 1000, 'in_progress', 0, 'todo', 0, 'queued', 0, 'no_problem', 300 + mod(p.g, 50),"
        " 'warning', 350 - mod(p.g, 50), 'error', 250, 'fatal', 80, 'invalid', 20, 'blocked', 0)"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_corpus (name, path, description, state, created_at, imported_at)"
            " SELECT %s || lpad(g::text, 2, '0'), '/nonexistent', 'runs history benchmark', 'ready', now(), now()"
            " FROM generate_series(0, %s - 1) g ON CONFLICT (name) DO NOTHING",
            [HISTORY_PREFIX, HISTORY_CORPORA],
        )
        cursor.execute(
            "CREATE TEMP TABLE bench_runs_plan ON COMMIT DROP AS"
            " WITH pairs AS (SELECT row_number() OVER (ORDER BY c.name, s.name) - 1 AS p, c.id AS corpus_id,"
            "   s.id AS service_id FROM corpora_corpus c, services_service s"
            "   WHERE c.name LIKE %s AND s.id = ANY(%s)),"
            " plan AS (SELECT g, CASE WHEN mod(g, %s) = 0 THEN 0 ELSE 1 + mod(g, (SELECT count(*) FROM pairs) - 1)"
            "   END AS p FROM generate_series(1, %s) g)"
            " SELECT plan.g, pairs.corpus_id, pairs.service_id, false AS open,"
            "  date_trunc('second', now()) - (%s - plan.g + 1) * interval '1 hour' AS started_at"
            " FROM plan JOIN pairs USING (p)",
            [HISTORY_PREFIX + "%", list(service_ids), HISTORY_BIG_PAIR_SHARE, runs, runs],
        )
        cursor.execute(
            "UPDATE bench_runs_plan SET open = true WHERE g IN (SELECT max(g) FROM bench_runs_plan"
            " GROUP BY corpus_id, service_id ORDER BY max(g) DESC LIMIT %s)",
            [HISTORY_OPEN],
        )
        cursor.execute(
            "INSERT INTO corpora_snapshot (corpus_id, service_id, taken_at, tasks, document_ids, statuses)"
            " SELECT corpus_id, service_id, started_at + interval '30 minutes', 10,"
            "  ARRAY(SELECT g * 10 + k FROM generate_series(0, 9) k)::bigint[],"
            "  ARRAY(SELECT (-1 - mod(g + k, 5))::smallint FROM generate_series(0, 9) k)"
            " FROM bench_runs_plan WHERE NOT open"
        )
        snapshots = cursor.rowcount
        cursor.execute(
            "INSERT INTO corpora_run (corpus_id, service_id, owner, description, started_at, finished_at, tallies,"
            "  snapshot_id)"
            " SELECT p.corpus_id, p.service_id, %s, 'history run ' || p.g, p.started_at, s.taken_at,"
            f"  CASE WHEN p.open THEN NULL ELSE {tallies} END, s.id"
            " FROM bench_runs_plan p LEFT JOIN corpora_snapshot s ON NOT p.open AND s.corpus_id = p.corpus_id"
            "  AND s.service_id = p.service_id AND s.taken_at = p.started_at + interval '30 minutes'",
            [actor],
        )
        made = cursor.rowcount
        cursor.execute("SELECT count(*) FROM bench_runs_plan WHERE open")
        opened = cursor.fetchone()[0]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE corpora_run, corpora_snapshot, corpora_corpus")
    return {"runs": made, "snapshots": snapshots, "open": opened}


def history_pair(index: int, service: str) -> tuple[str, str]:
    return f"{HISTORY_PREFIX}{index:02d}", service
