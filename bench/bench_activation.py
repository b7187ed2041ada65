"""Activation of a service on a corpus of 1,000,000 documents (target: at most 30 s), then the corpus
detail through the real request stack (target: under 100 ms), then corpus_delete (no target).

The corpus is built directly in SQL (a ready corpus, its documents and one no_problem import task
each, with generate_series); the task-count triggers fill corpora_taskcount as they would on a real
import. Building is timed separately and is not part of any measurement.

Run: .venv/bin/python bench/bench_activation.py [--documents N] [--requests N] [--explain] [--keep]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import harness

harness.configure("ccs_bench", 14, Path("/tmp/ccs-bench"))

ACTIVATION_TARGET_SECONDS = 30.0
DETAIL_TARGET_MS = 100.0
SERVICE = "bench-tex-to-html"
EXPLAIN_SERVICE = "bench-explain"


def corpus_build(name: str, documents: int, *, vacuum: bool) -> dict[str, float]:
    """A ready corpus with `documents` documents and their import tasks, in three statements."""
    from django.db import connection, transaction

    from corpora.actions.corpora import _import_service_id

    directory = harness.CORPUS_ROOT / name
    directory.mkdir(parents=True, exist_ok=True)  # activation never reads the entries
    seconds: dict[str, float] = {}
    with harness.timed() as insert, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_corpus (name, path, description, state, created_at, imported_at)"
            " VALUES (%s, %s, 'benchmark corpus built in SQL', 'ready', now(), now()) RETURNING id",
            [name, str(directory)],
        )
        corpus_id = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO corpora_document (corpus_id, name, entry, kind, main_file, created_at)"
            " SELECT %s, n, n || '.tex', 'tex', n || '.tex', now()"
            " FROM (SELECT 'p' || lpad(g::text, 7, '0') AS n FROM generate_series(1, %s) g) s",
            [corpus_id, documents],
        )
        cursor.execute(
            "INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
            " SELECT corpus_id, %s, id, -1 FROM corpora_document WHERE corpus_id = %s",
            [_import_service_id(), corpus_id],
        )
    seconds["insert"] = insert.seconds
    if vacuum:
        # A settled database: autovacuum would have analyzed these tables soon after a real import.
        with harness.timed() as settle, connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE) corpora_document, corpora_task, corpora_taskcount")
        seconds["vacuum analyze"] = settle.seconds
    return seconds


def service_ensure(name: str) -> None:
    from services.actions import service_register
    from services.models import Service

    if not Service.objects.filter(name=name).exists():
        service_register(name=name, actor=harness.ACTOR, description="benchmark service")


def activation_explain(corpus_name: str) -> None:
    """EXPLAIN ANALYZE of the activation statement for a second service, with the deferred
    foreign-key checks made immediate so their cost shows; rolled back."""
    from django.db import connection, transaction

    from corpora.actions.corpora import _import_service_id
    from corpora.models import Corpus
    from services.models import Service

    corpus_id = Corpus.objects.get(name=corpus_name).pk
    service_id = Service.objects.get(name=EXPLAIN_SERVICE).pk
    sql = (
        "EXPLAIN (ANALYZE, BUFFERS) INSERT INTO corpora_task (corpus_id, service_id, document_id, status)"
        " SELECT i.corpus_id, %s, i.document_id, 0 FROM corpora_task i"
        " WHERE i.corpus_id = %s AND i.service_id = %s AND i.status <> -5"
        " ON CONFLICT (service_id, document_id) DO NOTHING"
    )
    print("EXPLAIN ANALYZE of the activation INSERT (constraints immediate, rolled back):")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(sql, [service_id, corpus_id, _import_service_id()])
        for (line,) in cursor.fetchall():
            print(f"    {line}")
        transaction.set_rollback(True)


def detail_measure(corpus_name: str, documents: int, requests: int, token: str) -> list[float]:
    """GET /api/corpora/<name> through Django's full stack; milliseconds per request."""
    import time

    from django.test import Client

    client = Client()
    timings = []
    for _ in range(requests):
        began = time.perf_counter()
        response = client.get(f"/api/corpora/{corpus_name}", HTTP_X_SERVICE_TOKEN=token)
        timings.append((time.perf_counter() - began) * 1000)
        if response.status_code != 200:
            harness.fail(f"GET /api/corpora/{corpus_name} answered {response.status_code}: {response.content[:300]!r}")
    body = json.loads(response.content)
    counts = {service["name"]: service["counts"] for service in body["services"]}
    if counts.get(SERVICE, {}).get("todo") != documents or body["documents"] != documents:
        harness.fail(f"the detail shows documents={body['documents']} and counts {counts}; expected {documents} todo")
    print(f"detail body: documents={body['documents']} {SERVICE}={counts[SERVICE]}")
    return timings


def delete_measure(corpus_name: str, timeout_seconds: int) -> float | None:
    """corpus_delete as it is, stopped by pg_cancel_backend from a watchdog after the timeout (a
    statement_timeout would not bound the COMMIT, where the deferred foreign-key checks run);
    seconds, or None when it did not finish in time."""
    import threading

    import psycopg
    from django.db import DatabaseError, connection

    from corpora.actions.corpora import corpus_delete

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    def cancel() -> None:
        with psycopg.connect(f"{harness.PG_SERVER}/{harness.BENCH_DB}", autocommit=True) as conn:
            conn.execute("SELECT pg_cancel_backend(%s)", [backend])

    watchdog = threading.Timer(timeout_seconds, cancel)
    watchdog.start()
    try:
        with harness.timed() as timer:
            corpus_delete(name=corpus_name, confirm=corpus_name, actor=harness.ACTOR)
    except DatabaseError as exc:
        print(f"corpus_delete cancelled after {timer.seconds:.0f} s ({type(exc).__name__})")
        return None
    finally:
        watchdog.cancel()
    return timer.seconds


def main() -> None:
    """Build, activate, read the detail, delete; print every timing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200, help="corpus detail requests to time")
    parser.add_argument("--no-vacuum", action="store_true", help="skip VACUUM ANALYZE after building")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE the activation statement")
    parser.add_argument("--delete-timeout", type=int, default=300, help="seconds before corpus_delete is stopped")
    parser.add_argument("--keep", action="store_true", help="keep the corpus afterwards (no delete timing)")
    harness.quiet_arguments(parser, wait=900)
    args = parser.parse_args()

    harness.setup()

    from corpora.actions import corpora as actions
    from jobs.runner import job_run

    corpus_name = f"bench-activation-{args.documents}"
    cleaned = harness.corpus_purge_unchecked(corpus_name)
    if cleaned is not None:
        print(f"removed the corpus left by an earlier run in {cleaned:.1f} s (bench-only unchecked purge)")
    service_ensure(SERVICE)
    service_ensure(EXPLAIN_SERVICE)
    token = harness.bench_token()

    built = corpus_build(corpus_name, args.documents, vacuum=not args.no_vacuum)
    shown = ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in built.items())
    print(f"built {corpus_name} in SQL: {shown} (not part of the measurement)")

    harness.quiet_wait(args.max_load, args.wait)
    with harness.phases_recorded([(actions, "service_activate_run")]) as log, harness.timed() as activation:
        job = actions.service_activate(corpus_name=corpus_name, service_name=SERVICE, actor=harness.ACTOR, send=False)
        state = job_run(job.pk)
    job.refresh_from_db()
    if state != "succeeded" or (job.result or {}).get("tasks") != args.documents:
        harness.fail(f"the activation job ended {state} with {job.result} ({job.message})")
    run = log.seconds("service_activate_run")
    inside = log.statements_between(log.starts["service_activate_run"], log.ends["service_activate_run"])
    last_end = max(began + seconds for began, seconds, _ in log.statements if began <= log.ends["service_activate_run"])
    print("phases:")
    print(f"  job body           {run:8.3f} s")
    print("\n".join(harness.statement_lines([s for s in inside if s[0] >= 0.005])))
    commit = log.ends["service_activate_run"] - last_end
    print(f"  commit             {commit:8.3f} s  (deferred constraint checks, if any)")
    print(f"  job overhead       {activation.seconds - run:8.3f} s  (activation row + job, claim, finish)")
    print(f"end of activation: {harness.load_line()}")
    verdict = "met" if activation.seconds <= ACTIVATION_TARGET_SECONDS else "MISSED"
    print(
        f"activation on {args.documents:,} documents: {activation.seconds:.1f} s, "
        f"{args.documents / activation.seconds:,.0f} tasks/s (target <= {ACTIVATION_TARGET_SECONDS:.0f} s: {verdict})"
    )

    timings = detail_measure(corpus_name, args.documents, args.requests, token)
    p50, p95 = harness.percentile(timings, 0.5), harness.percentile(timings, 0.95)
    print(f"end of detail: {harness.load_line()}")
    verdict = "met" if p95 < DETAIL_TARGET_MS else "MISSED"
    print(
        f"corpus detail x{len(timings)}: p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(timings):.1f} ms "
        f"(first {timings[0]:.1f} ms; target < {DETAIL_TARGET_MS:.0f} ms: {verdict})"
    )

    if args.explain:
        activation_explain(corpus_name)
    if args.keep:
        return
    deleted = delete_measure(corpus_name, args.delete_timeout)
    if deleted is None:
        purged = harness.corpus_purge_unchecked(corpus_name)
        print(f"corpus_delete: did not finish within {args.delete_timeout} s; bench-only purge took {purged:.1f} s")
    else:
        print(f"corpus_delete: {deleted:.1f} s (no target)")


if __name__ == "__main__":
    main()
