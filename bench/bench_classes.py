"""Message classes in snapshots on 1,000,000 tex_to_html tasks and 10,000,000 log messages (issue "What
changed, why, and how fast", part 2).

Targets: a snapshot with class tallies and membership (corpora.pairs.snapshot_take) <= 10 s; the class
diff of two snapshots (GET /api/runs/{c}/{s}/classes) <= 2 s; a page of the documents that gained or lost
a class (GET /api/runs/{c}/{s}/classes/{severity}/{category}/{what}/tasks) p95 <= 100 ms.

The data are bench/reports_data.py's (1M tasks, 10 messages each, Zipf-like classes), generated into a
database of this script's own and reused. The scenario: a snapshot; then a "new converter" changes
messages through the one message writer (corpora.message_store): the 100,000 tasks of the rerun what-class
lose it (the fixed failure), 20,000 others, spread over the corpus, gain a new error class, and each of
those tasks loses its first warning (many warning classes lose a few documents each); a second
snapshot; the class diff; gained and lost pages of the classes that changed most, at several offsets.
Afterwards the changed tasks get their messages back and both snapshots are deleted, so the script can
run again (a run stopped midway leaves a marker, and the next run drops the database and builds it anew).
Every endpoint is requested through Django's full request stack (django.test.Client).

Run: .venv/bin/python bench/bench_classes.py [--tasks N] [--requests N] [--rounds N]
"""

# ruff: noqa: S608  (the SQL here is this script's own text; values are parameters)
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import harness  # bench/ is the script's directory

harness.configure("ccs_classes_bench", 6, Path("/tmp/ccs-classes-bench"))
BENCH_DB = harness.BENCH_DB
PG_SERVER = harness.PG_SERVER
ACTOR = harness.ACTOR
fail = harness.fail
quietly = harness.quietly

import reports_data  # noqa: E402  (it imports Django lazily)

SNAPSHOT_TARGET_S = 10.0
CLASS_DIFF_TARGET_S = 2.0
PAGE_TARGET_MS = 100.0
NEW_CLASS = ("error", "undefined", "\\bench@newfailure")
NEW_CLASS_EVERY = 50  # one task in 50 gains it: 20,000 of 1,000,000
WRITE_BATCH = 5_000
PAGE_OFFSETS = (0, 1_000, 10_000, 50_000)
CLASSES_PAGED = 8  # the classes of warning severity or worse that changed most


def database_prepare(tasks: int) -> None:
    """Create the database if missing; drop it when it holds a partial build, one of another size, or one
    a stopped run left changed."""
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
    if exists:
        with psycopg.connect(f"{PG_SERVER}/{BENCH_DB}", autocommit=True) as conn:
            tables = {name for (name,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
            meta = dirty = None
            if "bench_reports_meta" in tables:
                row = conn.execute("SELECT value FROM bench_reports_meta WHERE key = 'complete'").fetchone()
                meta = row[0] if row else None
                dirty = conn.execute("SELECT 1 FROM bench_reports_meta WHERE key = 'classes_changed'").fetchone()
        if meta and meta.get("tasks") == tasks and not dirty:
            return
        print(f"dropping {BENCH_DB}: {'a stopped run changed it' if dirty else 'it holds another or a partial build'}")
        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{BENCH_DB}" WITH (FORCE)')
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


# --- the change between the two snapshots -----------------------------------------------------------


def changed_tasks(corpus_id: int, service_id: int) -> list[int]:
    """The tasks the change touches: those with the rerun what-class, and one in NEW_CLASS_EVERY of the
    others (by task id)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT p.task_id FROM corpora_taskclass p"
            " JOIN corpora_messageclass k ON k.id = p.message_class_id WHERE p.corpus_id = %s AND p.service_id = %s"
            " AND k.level = 0 AND k.category = %s AND k.what = %s",
            [corpus_id, service_id, reports_data.SPECIAL_CATEGORY, reports_data.SPECIAL_WHAT],
        )
        fixed = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            "SELECT id FROM corpora_task WHERE corpus_id = %s AND service_id = %s AND id %% %s = 0",
            [corpus_id, service_id, NEW_CLASS_EVERY],
        )
        gaining = {row[0] for row in cursor.fetchall()} - fixed
    return sorted(fixed | gaining)


def messages_of(task_ids: list[int]) -> dict[int, tuple[int, int, int, list[tuple[str, str, str, str]]]]:
    """Each task's (corpus, service, status, messages in log order), read set-based from the messages view."""
    from django.db import connection

    found: dict[int, tuple[int, int, int, list[tuple[str, str, str, str]]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.task_id, m.corpus_id, m.service_id, m.task_status, m.severity, m.category, m.what, m.details"
            " FROM corpora_logmessage m WHERE m.task_id = ANY(%s) ORDER BY m.task_id, m.position",
            [task_ids],
        )
        for task_id, corpus_id, service_id, status, *message in cursor.fetchall():
            found.setdefault(task_id, (corpus_id, service_id, status, []))[3].append(tuple(message))
    return found


def messages_rewrite(rows: dict[int, tuple[int, int, int, list[tuple[str, str, str, str]]]]) -> None:
    """Replace the tasks' messages through the message writer, WRITE_BATCH tasks per transaction."""
    from django.db import connection, transaction

    from corpora.message_store import messages_delete, messages_write

    task_ids = sorted(rows)
    for start in range(0, len(task_ids), WRITE_BATCH):
        batch = task_ids[start : start + WRITE_BATCH]
        with transaction.atomic(), connection.cursor() as cursor:
            messages_delete(cursor, batch)
            messages_write(cursor, [(task_id, *rows[task_id]) for task_id in batch])


def changed(
    original: dict[int, tuple[int, int, int, list[tuple[str, str, str, str]]]],
) -> dict[int, tuple[int, int, int, list[tuple[str, str, str, str]]]]:
    """The new converter's messages: the rerun what-class gone from its tasks, the new class added to the
    rest, and every changed task's first warning gone (so many warning classes lose a few documents each,
    spread over the corpus)."""
    special = ("error", reports_data.SPECIAL_CATEGORY, reports_data.SPECIAL_WHAT)
    result = {}
    for task_id, (corpus_id, service_id, status, messages) in original.items():
        kept = [m for m in messages if m[:3] != special]
        if len(kept) == len(messages):
            kept = [*messages, (*NEW_CLASS, "the new converter's failure")]
        first_warning = next((index for index, m in enumerate(kept) if m[0] == "warning"), None)
        if first_warning is not None:
            del kept[first_warning]
        result[task_id] = (corpus_id, service_id, status, kept)
    return result


def marker(on: bool) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        if on:
            cursor.execute("INSERT INTO bench_reports_meta (key, value) VALUES ('classes_changed', 'true'::jsonb)")
        else:
            cursor.execute("DELETE FROM bench_reports_meta WHERE key = 'classes_changed'")


def snapshots_delete(cursor: Any, condition: str, params: list[Any]) -> None:
    """Delete the snapshots `condition` (on corpora_snapshot) names, with their classes."""
    snapshots = f"SELECT id FROM corpora_snapshot WHERE {condition}"
    for table in ("corpora_snapshotmembers", "corpora_snapshotclass"):
        cursor.execute(f"DELETE FROM {table} WHERE snapshot_id IN ({snapshots})", params)
    cursor.execute(f"DELETE FROM corpora_snapshot WHERE {condition}", params)


def history_clear(corpus_id: int, service_id: int) -> None:
    """Delete the pair's snapshots, their classes and diffs (what this script took)."""
    from django.db import connection, transaction

    pair = "corpus_id = %s AND service_id = %s"
    with transaction.atomic(), connection.cursor() as cursor:
        diffs = (
            f"SELECT d.id FROM corpora_snapshotdiff d JOIN corpora_snapshot s ON s.id = d.previous_id WHERE s.{pair}"
        )
        cursor.execute(f"DELETE FROM corpora_taskdiff WHERE diff_id IN ({diffs})", [corpus_id, service_id])
        cursor.execute(f"DELETE FROM corpora_snapshotdiff WHERE id IN ({diffs})", [corpus_id, service_id])
        cursor.execute(f"UPDATE corpora_run SET snapshot_id = NULL WHERE {pair}", [corpus_id, service_id])
        snapshots_delete(cursor, pair, [corpus_id, service_id])


# --- measurements -------------------------------------------------------------------------------------


def snapshots_timed(label: str, corpus_id: int, service_id: int, rounds: int, wait: float) -> tuple[list[float], Any]:
    """`rounds` snapshots of the pair (corpora.pairs.snapshot_take), each timed once the machine is quiet:
    their seconds and the first one taken, which is kept; the others are deleted again."""
    from django.db import connection

    from corpora.pairs import snapshot_take

    def timed() -> tuple[float, Any]:
        began = time.perf_counter()
        taken = snapshot_take(corpus_id=corpus_id, service_id=service_id)
        return time.perf_counter() - began, taken

    seconds, kept = [], None
    for round_ in range(rounds):
        elapsed, taken = quietly(f"{label} {round_ + 1}", timed, wait=wait)
        seconds.append(elapsed)
        if kept is None:
            kept = taken
        else:
            with connection.cursor() as cursor:
                snapshots_delete(cursor, "id = %s", [taken.snapshot_id])
    return seconds, kept


def class_diff_timed(client: Any, url: str) -> tuple[float, list[dict[str, Any]]]:
    import json

    began = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - began
    if response.status_code != 200:
        fail(f"GET {url} answered {response.status_code}: {response.content[:300]!r}")
    return elapsed, json.loads(response.content)


def check_history(url: str, body: Any) -> str | None:
    entries = body.get("entries", [])
    return None if len(entries) == 2 and all(len(e["classes"]) == len(body["classes"]) for e in entries) else "bad"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000, help="documents (tex_to_html tasks)")
    parser.add_argument("--requests", type=int, default=200, help="timed gained/lost page requests")
    parser.add_argument("--rounds", type=int, default=3, help="snapshots and class diffs timed")
    parser.add_argument("--wait", type=float, default=7200, help="seconds to wait for other benchmarks at most")
    args = parser.parse_args()

    database_prepare(args.tasks)
    harness.setup()
    from django.db import connection
    from django.test import Client

    from corpora.models import Corpus
    from services.models import Service

    reports_data.data_ensure(args.tasks, ACTOR)
    corpus_id = Corpus.objects.get(name=reports_data.CORPUS).pk
    service_id = Service.objects.get(name=reports_data.SERVICE).pk
    history_clear(corpus_id, service_id)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_taskclass, corpora_messagetally, corpora_task")
    print(harness.load_line())

    # Snapshots of the unchanged data: the first is kept as `previous`, the others deleted again.
    before, previous = snapshots_timed("snapshot", corpus_id, service_id, args.rounds, args.wait)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(cardinality(document_ids)), 0),"
            " coalesce(sum(pg_column_size(document_ids)), 0) FROM corpora_snapshotmembers WHERE snapshot_id = %s",
            [previous.snapshot_id],
        )
        member_rows, members, member_bytes = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM corpora_snapshotclass WHERE snapshot_id = %s", [previous.snapshot_id])
        class_rows = cursor.fetchone()[0]
    print(f"snapshot (statuses, {class_rows:,} class tallies, {members:,} memberships in {member_rows:,} chunks,"
          f" {member_bytes / 1e6:.1f} MB stored): {', '.join(f'{s:.2f}' for s in before)} s;"
          f" best {min(before):.2f} s, target {SNAPSHOT_TARGET_S:.0f} s:"
          f" {verdict(min(before), SNAPSHOT_TARGET_S)}")  # fmt: skip

    tasks = changed_tasks(corpus_id, service_id)
    original = messages_of(tasks)
    marker(True)
    began = time.perf_counter()
    messages_rewrite(changed(original))
    print(f"change: {len(tasks):,} tasks' messages rewritten in {time.perf_counter() - began:.1f} s (not measured)")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_taskclass, corpora_messagetally")
    after, current = snapshots_timed("snapshot after", corpus_id, service_id, args.rounds, args.wait)
    print(f"snapshot after the change: {', '.join(f'{s:.2f}' for s in after)} s; best {min(after):.2f} s")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) corpora_snapshotmembers, corpora_snapshotclass, corpora_snapshot")

    pair = f"/api/runs/{quote(reports_data.CORPUS)}/{quote(reports_data.SERVICE)}"
    dates = {"previous": previous.taken_at.isoformat(), "current": current.taken_at.isoformat()}
    client = Client()
    diff_url = f"{pair}/classes?{urlencode(dates)}"
    diffs = []
    changes: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        seconds, changes = quietly(
            f"class diff {round_ + 1}", lambda: class_diff_timed(client, diff_url), wait=args.wait
        )
        diffs.append(seconds)
    total = class_diff_timed(client, f"{pair}/classes?{urlencode({**dates, 'page_size': 1000})}")[1]
    by_class = {(c["severity"], c["category"], c["what"]): c for c in total}
    special = ("error", reports_data.SPECIAL_CATEGORY, reports_data.SPECIAL_WHAT)
    if by_class.get(special, {}).get("kind") != "vanished" or by_class.get(NEW_CLASS, {}).get("kind") != "appeared":
        fail(f"the class diff does not show the change: {by_class.get(special)}, {by_class.get(NEW_CLASS)}")
    median = sorted(diffs)[len(diffs) // 2]
    print(f"class diff ({len(total):,} classes changed; first page of {len(changes)}): "
          f"{', '.join(f'{s:.3f}' for s in diffs)} s; median {median:.3f} s,"
          f" target {CLASS_DIFF_TARGET_S:.0f} s: {verdict(median, CLASS_DIFF_TARGET_S)}")  # fmt: skip

    listed = [c for c in total if c["documents_listed"]][:CLASSES_PAGED]
    urls = []
    for change in listed:
        names = "/".join(quote(change[key], safe="") for key in ("severity", "category", "what"))
        path = f"{pair}/classes/{names}/tasks"
        for which, count in (("gained", max(change["change"], 0)), ("lost", max(-change["change"], 0))):
            for offset in PAGE_OFFSETS:
                if offset < count:
                    urls.append(f"{path}?{urlencode({**dates, 'change': which, 'offset': offset, 'page_size': 100})}")
    for url in urls:
        if not client.get(url).json():
            fail(f"an empty page where the class diff counts more documents: {url}")

    def check(url: str, body: Any) -> str | None:
        return None if isinstance(body, list) else "not a list"

    pages = harness.PageSet("gained/lost", urls, check)
    quietly("gained and lost pages", lambda: harness.pages_measure(pages, args.requests, ""), wait=args.wait)
    p95 = harness.percentile(pages.timings, 0.95)
    slowest = max(pages.by_url, key=lambda url: harness.percentile(pages.by_url[url], 0.5))
    print(f"gained/lost pages ({len(urls)} URLs over {len(listed)} classes, offsets {PAGE_OFFSETS}):"
          f" p50 {harness.percentile(pages.timings, 0.5):.1f} ms, p95 {p95:.1f} ms, max {max(pages.timings):.1f} ms;"
          f" target p95 {PAGE_TARGET_MS:.0f} ms: {verdict(p95, PAGE_TARGET_MS)}")  # fmt: skip
    print(f"  slowest URL by median: {slowest} ({harness.percentile(pages.by_url[slowest], 0.5):.1f} ms)")

    # A document's history over the two snapshots: documents the change touched and others.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.name FROM corpora_task t JOIN corpora_document d ON d.id = t.document_id"
            " WHERE t.id = ANY(%s) ORDER BY t.id LIMIT 20",
            [tasks[:: max(len(tasks) // 20, 1)]],
        )
        names = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT d.name FROM corpora_task t JOIN corpora_document d ON d.id = t.document_id"
            " WHERE t.corpus_id = %s AND t.service_id = %s AND t.id %% 50000 = 7 LIMIT 20",
            [corpus_id, service_id],
        )
        names += [row[0] for row in cursor.fetchall()]
    document = f"/api/corpus/{quote(reports_data.CORPUS)}/{quote(reports_data.SERVICE)}/document"
    histories = harness.PageSet("history", [f"{document}/{quote(name)}/history" for name in names], check_history)
    quietly("document histories", lambda: harness.pages_measure(histories, args.requests, ""), wait=args.wait)
    p50, p95 = (harness.percentile(histories.timings, q) for q in (0.5, 0.95))
    print(f"document history ({len(names)} documents, 2 snapshots): p50 {p50:.1f} ms, p95 {p95:.1f} ms")

    began = time.perf_counter()
    messages_rewrite(original)
    history_clear(corpus_id, service_id)
    marker(False)
    print(f"restored the changed tasks and deleted the snapshots in {time.perf_counter() - began:.1f} s")
    print(harness.load_line())
    if harness.DISTURBED:
        print(f"measured while disturbed: {', '.join(harness.DISTURBED)}")


if __name__ == "__main__":
    main()
