"""Package attribution at arXiv's size: 2,800,000 papers with their package rows (issue #41), in the shape
of the real papers (46 package rows a paper, 2.5% of them showing trouble): one class each, mostly
`article`, and 45 packages on average (`--packages-per-paper`), a long tail of them rare, 5% of the rare
ones missing, a few clearing papers. Statuses are 30% no problem, 35% warning, 25% error and 10% fatal.

The data set is built set-based in SQL into the database ccs_package_scale_bench: documents, the package
rows (TaskPackage, unlogged, its indexes made after), and from them the usage dictionary and the tallies,
as the tally migration builds them. A later run with the same options reuses it (the table
package_scale_made records them); `--drop` drops the database.

Measured, each `--repeat` times (p50 and max), the figures in the JSON object `--json` prints last:
- `ranking_rows_ms`: the first page of the ranking summed over the package rows, as the ranking read
  before the tallies (the statement is kept here to compare);
- `ranking_ms`: the first page through corpora.queries.packages.package_ranking, which sums the tallies;
  `ranking_deep_ms` its last page;
- `papers_top_ms`, `papers_widest_ms`: the first page of papers behind the top-ranked row and behind the
  class every paper but a few uses (package_papers);
- `snapshot_packages_s`: the snapshot's package statement (corpora.pairs.snapshot_take's), rolled back;
- `ranking_retired_ms`: the first page while a rerun's 100,000 tasks (`--rerun-tasks`) await the purge,
  their usages taken off at reading (corpora.queries.corpora.package_tallies_sql);
- `purge_batch_packages_ms`: what a purge batch of 5,000 retired tasks adds, their usages taken off the
  package tallies (corpora.message_store._tallies_take_gone). Both rolled back.

Run: .venv/bin/python bench/bench_package_scale.py [--papers 2800000] [--packages-per-paper 45]
     [--rerun-tasks 100000] [--repeat 5] [--json] [--drop]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import harness  # bench/ is the script's directory

harness.configure("ccs_package_scale_bench", 4, Path("/tmp/ccs-package-scale-bench"))

CORPUS = "arxiv-scale"
SERVICE = "tex_to_html"
CHUNK = 200_000  # papers per generation statement
PACKAGES = 6_000  # distinct packages
CLASSES = 300  # distinct classes


def say(text: str = "") -> None:
    print(text, flush=True)


def made(cursor: Any) -> dict | None:
    cursor.execute("CREATE TABLE IF NOT EXISTS package_scale_made (options jsonb, seconds float)")
    cursor.execute("SELECT options, seconds FROM package_scale_made")
    row = cursor.fetchone()
    return {"options": row[0], "seconds": row[1]} if row else None


def generate(options: dict, corpus_id: int, service_id: int) -> float:
    """The documents and package rows of `papers` papers, then the usages and tallies, set-based."""
    from django.db import connection, transaction

    papers, per_paper = options["papers"], options["packages_per_paper"]
    began = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE corpora_taskpackage, corpora_packagetally, corpora_packageusage")
        cursor.execute("DELETE FROM corpora_document WHERE corpus_id = %s", [corpus_id])
        cursor.execute("ALTER TABLE corpora_taskpackage SET UNLOGGED")  # a data set to read: no WAL
        cursor.execute("SET maintenance_work_mem = '1GB'")
        # Built without its indexes, which are made once at the end from their definitions.
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'corpora_taskpackage'")
        indexes = cursor.fetchall()
        cursor.execute("ALTER TABLE corpora_taskpackage DROP CONSTRAINT corpora_taskpackage_pkey")
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    for first in range(1, papers + 1, CHUNK):
        last = min(papers, first + CHUNK - 1)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO corpora_document (id, corpus_id, name, entry, kind, main_file, created_at)"
                " SELECT i, %s, 'p' || lpad(i::text, 8, '0'), 'p' || i || '.tar.gz', 'tar.gz', 'main.tex', now()"
                " FROM generate_series(%s, %s) i",
                [corpus_id, first, last],
            )
            # Per paper: its status (-1..-4), one class (article for 60%), and 5 to 2K - 5 packages (K on
            # average), slot j drawing the rank j + 2K * floor(Zipf): distinct within a paper, a long tail.
            # Rare packages (rank > 500) are missing for 5% of their papers; 4% of those clear an error.
            cursor.execute(
                "WITH p AS (SELECT i, CASE WHEN r < 0.30 THEN -1 WHEN r < 0.65 THEN -2 WHEN r < 0.90 THEN -3"
                "  ELSE -4 END AS status FROM (SELECT i, random() AS r FROM generate_series(%s, %s) i) s)"
                " INSERT INTO corpora_taskpackage (task_id, document_id, corpus_id, service_id, task_status, kind,"
                "  package, flags, errors)"
                " SELECT p.i, p.i, %s, %s, p.status, 'class',"
                "  CASE WHEN random() < 0.6 THEN 'article' ELSE 'class' || floor(%s ^ random())::int END, 1, 0"
                " FROM p UNION ALL"
                " SELECT p.i, p.i, %s, %s, p.status, 'package', 'pkg' || u.rank,"
                "  CASE WHEN u.rank > 500 AND u.m < 0.05 THEN"
                "   CASE WHEN u.m < 0.002 AND p.status = -3 THEN 4 | 32 | 64 ELSE 4 | 32 END"
                "  ELSE 1 END, 0"
                " FROM p, LATERAL (SELECT j + 2 * %s * floor((%s / (2 * %s))::float ^ random())::int AS rank,"
                "  random() AS m"
                "  FROM generate_series(1, 5 + (p.i %% (2 * %s - 9))) j) u",
                [first, last, corpus_id, service_id, CLASSES, corpus_id, service_id,
                 per_paper, PACKAGES, per_paper, per_paper],
            )  # fmt: skip
        say(f"  {last:,} papers, {time.monotonic() - began:.0f} s")
    with transaction.atomic(), connection.cursor() as cursor:
        for name, definition in indexes:
            cursor.execute(definition)
            if name == "corpora_taskpackage_pkey":
                cursor.execute(f"ALTER TABLE corpora_taskpackage ADD PRIMARY KEY USING INDEX {name}")
        say(f"  indexed, {time.monotonic() - began:.0f} s")
        cursor.execute(
            "INSERT INTO corpora_packageusage (kind, package, flags)"
            " SELECT DISTINCT kind, package, flags FROM corpora_taskpackage ORDER BY 1, 2, 3"
        )
        cursor.execute(
            "INSERT INTO corpora_packagetally (corpus_id, service_id, task_status, package_usage_id, tasks)"
            " SELECT k.corpus_id, k.service_id, k.task_status, u.id, count(*) FROM corpora_taskpackage k"
            " JOIN corpora_packageusage u ON (u.kind, u.package, u.flags) = (k.kind, k.package, k.flags)"
            " GROUP BY 1, 2, 3, 4"
        )
        cursor.execute("DELETE FROM package_scale_made")
        seconds = time.monotonic() - began
        cursor.execute("INSERT INTO package_scale_made VALUES (%s, %s)", [json.dumps(options), seconds])
    with connection.cursor() as cursor:
        cursor.execute(
            "VACUUM ANALYZE corpora_taskpackage, corpora_packagetally, corpora_packageusage, corpora_document"
        )
    return seconds


# The ranking as it read before the tallies: every package row of the pair, grouped (kept to compare).
RANKING_BY_ROWS = (
    "SELECT r.kind, r.package, count(*) AS papers, count(*) FILTER (WHERE r.task_status = -1),"
    " count(*) FILTER (WHERE r.task_status = -2), count(*) FILTER (WHERE r.task_status = -3),"
    " count(*) FILTER (WHERE r.task_status = -4), count(*) FILTER (WHERE r.task_status = -5),"
    " count(*) FILTER (WHERE r.flags & 32 <> 0) AS only_missing, count(*) FILTER (WHERE r.flags & 64 <> 0) AS clears,"
    " count(*) FILTER (WHERE r.flags & 128 <> 0) AS clears_weak, bit_or(r.flags), count(*) OVER () AS total"
    " FROM (SELECT p.kind, p.package, p.document_id, p.task_status, p.flags FROM corpora_taskpackage p"
    "  WHERE p.corpus_id = %s AND p.service_id = %s) r GROUP BY r.kind, r.package"
    " ORDER BY clears DESC, clears_weak DESC, only_missing DESC, papers DESC, kind, package OFFSET 0 LIMIT 50"
)


def timed(repeat: int, run: Any) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return {"p50": harness.percentile(times, 0.5), "max": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=2_800_000)
    parser.add_argument("--packages-per-paper", type=int, default=45)
    parser.add_argument("--rerun-tasks", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--drop", action="store_true")
    args = parser.parse_args()
    if args.drop:
        import psycopg

        with psycopg.connect(f"{harness.PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{harness.BENCH_DB}" WITH (FORCE)')
        say(f"dropped the database {harness.BENCH_DB}")
        return
    harness.setup()
    from django.db import connection, transaction

    from config.api.paging import Page
    from corpora.message_store import _GONE_TABLE, _tallies_take_gone
    from corpora.models import Corpus
    from corpora.pairs import BULK_SETTINGS, snapshot_packages_sql
    from corpora.queries.corpora import Pair
    from corpora.queries.packages import package_papers, package_ranking, package_source
    from services.models import Service

    corpus, _ = Corpus.objects.get_or_create(name=CORPUS, defaults={"path": "/nonexistent", "state": "ready"})
    service, _ = Service.objects.get_or_create(name=SERVICE)
    options = {"papers": args.papers, "packages_per_paper": args.packages_per_paper, "v": 2}
    with connection.cursor() as cursor:
        state = made(cursor)
    if state is None or state["options"] != options:
        say(f"building {args.papers:,} papers ({harness.load_line()})")
        generated = {"reused": False, "seconds": round(generate(options, corpus.pk, service.pk), 1)}
    else:
        generated = {"reused": True, "seconds": state["seconds"]}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM corpora_taskpackage")
        rows = cursor.fetchone()[0]
        cursor.execute("SELECT count(*), count(DISTINCT package_usage_id) FROM corpora_packagetally")
        tally_rows, usages = cursor.fetchone()
        cursor.execute(
            "SELECT pg_total_relation_size('corpora_taskpackage'), pg_total_relation_size('corpora_packagetally')"
        )
        rows_bytes, tally_bytes = cursor.fetchone()
    say(f"{args.papers:,} papers, {rows:,} package rows ({rows_bytes / 2**30:.1f} GiB), {tally_rows:,} tally rows"
        f" ({tally_bytes / 2**20:.1f} MiB) of {usages:,} usages; {harness.load_line()}")  # fmt: skip

    pair = Pair(corpus.pk, CORPUS, service.pk, SERVICE, True)
    source = package_source(pair)
    first = package_ranking(source, Page(0, 50))
    results: dict[str, Any] = {"papers": args.papers, "package_rows": rows, "tally_rows": tally_rows,
                               "generation": generated, "load_before": harness.load_line()}  # fmt: skip

    def by_rows() -> list:
        with connection.cursor() as cursor:
            cursor.execute(RANKING_BY_ROWS, [corpus.pk, service.pk])
            return cursor.fetchall()

    old = by_rows()
    assert [(r[0], r[1], r[2]) for r in old] == [(r.kind, r.package, r.papers) for r in first.rows], "rankings differ"
    say(f"ranking: {first.count:,} packages; top {first.rows[0].package} clears {first.rows[0].clears}")

    def measure(name: str, label: str, run: Any) -> None:
        results[name] = {key: round(value * 1000, 1) for key, value in timed(args.repeat, run).items()}
        say(f"  {label}: {results[name]} ms")

    measure("ranking_rows_ms", "the ranking summed over the package rows", by_rows)
    measure("ranking_ms", "the ranking summed over the tallies", lambda: package_ranking(source, Page(0, 50)))
    deep = Page(max(0, first.count - 50), 50)
    measure("ranking_deep_ms", "its last page", lambda: package_ranking(source, deep))
    top = first.rows[0]
    measure(
        "papers_top_ms", f"papers behind {top.package} ({top.papers:,})",
        lambda: package_papers(source, top.kind, top.package, Page(0, 50)),
    )  # fmt: skip
    measure(
        "papers_widest_ms",
        "papers behind class article",
        lambda: package_papers(source, "class", "article", Page(0, 50)),
    )

    def snapshot_packages() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            for statement in BULK_SETTINGS:
                cursor.execute(statement)
            statement, params = snapshot_packages_sql(corpus.pk, service.pk, "")
            cursor.execute(statement, [0, *params])
            transaction.set_rollback(True)

    results["snapshot_packages_s"] = timed(1, snapshot_packages)
    say(f"snapshot's package statement: {results['snapshot_packages_s']}")

    # A rerun of `--rerun-tasks` tasks: their task rows (with their usages, no messages) retired and not yet
    # purged. The rerun leaves the package tallies alone; the ranking takes their usages off meanwhile, and
    # each purge batch of 5,000 tasks takes them off the tallies. All rolled back.
    every = max(1, args.papers // args.rerun_tasks)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO corpora_taskmessages (task_id, corpus_id, service_id, task_status, classes, counts,"
            " rollups, rollup_counts, sequence, details, packages)"
            " SELECT k.task_id, k.corpus_id, k.service_id, k.task_status, '{}', '{}', '{}', '{}', '{}', '{}',"
            " array_agg(u.id) FROM corpora_taskpackage k JOIN corpora_packageusage u"
            " ON (u.kind, u.package, u.flags) = (k.kind, k.package, k.flags)"
            " WHERE k.task_id %% %s = 0 GROUP BY k.task_id, 2, 3, 4",
            [every],
        )
        cursor.execute(
            "INSERT INTO corpora_stalemessages (task_id, corpus_id, service_id)"
            " SELECT task_id, corpus_id, service_id FROM corpora_taskmessages"
        )
        retired = cursor.rowcount
        cursor.execute("ANALYZE corpora_taskmessages, corpora_stalemessages")
        measure("ranking_retired_ms", f"the ranking while {retired:,} retired tasks await the purge",
                lambda: package_ranking(package_source(pair), Page(0, 50)))  # fmt: skip

        def purge_batch() -> None:
            with transaction.atomic():
                cursor.execute(_GONE_TABLE)
                cursor.execute(
                    "INSERT INTO messages_gone SELECT x.corpus_id, x.service_id, x.task_status, '{}', '{}', 0,"
                    " x.packages FROM corpora_taskmessages x ORDER BY x.task_id LIMIT 5000"
                )
                _tallies_take_gone(cursor)
                transaction.set_rollback(True)

        measure("purge_batch_packages_ms", "a purge batch's 5,000 tasks off the package tallies", purge_batch)
        transaction.set_rollback(True)
    results["load_after"] = harness.load_line()
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
