"""What the run telemetry adds to the dispatcher's statements, timed in one process with the two versions
alternated batch by batch, so that a machine shared with other work slows both alike: the lease statement
without the telemetry (its text before issue #26, kept here as the reference) against
`corpora.task_changes.lease_batch`; the results lock without the open run and the times against
`corpora.task_changes.results_lock`; and `corpora.telemetry.results_record` (nothing before it).

Each round leases a batch of --lease-batch tasks of an open run's pair each way, then leases a batch of
--result-batch tasks, locks it each way (rolled back) and records the times of such a batch (rolled back).
Every lease takes tasks never leased before, and the round ends with its tasks given a final status, as
applying their results would (a task given back to TODO and leased again leaves dead entries in the TODO
index that the next lease walks, and tasks left leased make the lock's index range grow), so the corpus
needs rounds x (2 x lease batch + result batch) documents. Prints the median per batch and per task.
Figures: bench/README.md, "Dispatcher".

Run: .venv/bin/python bench/bench_telemetry.py [--rounds 60] [--lease-batch 200]
     [--result-batch 500]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import harness

harness.configure("ccs_dispatch_bench", 14, Path("/tmp/ccs-dispatch-bench"))

import bench_dispatcher  # noqa: E402  (after the harness points it at its database)

LEASE_BEFORE = """
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
"""
LOCK_BEFORE = (
    "SELECT id, corpus_id, service_id, attempts FROM corpora_task WHERE id = ANY(%s) AND status > 0 FOR UPDATE"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--lease-batch", type=int, default=200, help="DISPATCHER_LEASE_BATCH's default")
    parser.add_argument("--result-batch", type=int, default=500, help="DISPATCHER_RESULT_BATCH's default")
    args = parser.parse_args()
    harness.setup()
    from django.db import connection, transaction

    from corpora.models import Run
    from corpora.task_changes import lease_batch, results_lock
    from corpora.telemetry import results_record

    documents = args.rounds * (2 * args.lease_batch + args.result_batch)
    name, corpus_id, service_id, _ = bench_dispatcher.corpus_prepare(documents)
    run = Run.objects.get(corpus_id=corpus_id, service_id=service_id, finished_at__isnull=True)
    spent: dict[str, list[float]] = {key: [] for key in ("lease before", "lease after", "lock before", "lock after")}
    spent["results_record"] = []

    def finish(ids: list[int]) -> None:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE corpora_task SET status = -1, leased_until = NULL WHERE id = ANY(%s)", [ids])

    def lease(version: str) -> list[int]:
        mark, began = random.randint(1, 2**31 - 1), time.perf_counter()
        if version == "before":
            with connection.cursor() as cursor:
                params = {"service": service_id, "limit": args.lease_batch, "mark": mark, "lease": 900}
                cursor.execute(LEASE_BEFORE, params)
                ids = [row[0] for row in cursor.fetchall()]
        else:
            ids = [
                t.id for t in lease_batch(service_id=service_id, limit=args.lease_batch, mark=mark, lease_seconds=900)
            ]
        spent[f"lease {version}"].append(time.perf_counter() - began)
        return ids

    watch = harness.CpuWatch().start()
    try:
        for round_ in range(args.rounds):
            order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
            for version in order:
                finish(lease(version))
            mark = random.randint(1, 2**31 - 1)
            ids = [
                t.id for t in lease_batch(service_id=service_id, limit=args.result_batch, mark=mark, lease_seconds=900)
            ]
            for version in order:
                with transaction.atomic(), connection.cursor() as cursor:
                    began = time.perf_counter()
                    if version == "before":
                        cursor.execute(LOCK_BEFORE, [ids])
                        cursor.fetchall()
                    else:
                        results_lock(cursor, ids)
                    spent[f"lock {version}"].append(time.perf_counter() - began)
                    transaction.set_rollback(True)
            now = time.time()
            rows = [
                (run.pk, now - 1 - random.random(), run.started_at.timestamp(), now - random.random() / 5) for _ in ids
            ]
            with transaction.atomic(), connection.cursor() as cursor:
                began = time.perf_counter()
                results_record(cursor, rows)
                spent["results_record"].append(time.perf_counter() - began)
                transaction.set_rollback(True)
            finish(ids)
    finally:
        harness.corpus_remove(name)
    print(f"{args.rounds} rounds, alternated; meanwhile {watch.report()}")
    for label, seconds in spent.items():
        batch = args.lease_batch if label.startswith("lease") else args.result_batch
        median = statistics.median(seconds)
        print(f"  {label:15s} median {1e3 * median:7.3f} ms a batch of {batch} = {1e6 * median / batch:6.2f} us a task")


if __name__ == "__main__":
    main()
