"""The dataset export job (the `dataset_export` kind of corpora.tasks.corpora): ZIP archives of a pair's
already-converted results, written server-side under EXPORT_ROOT.

An export directory EXPORT_ROOT/<out>/ holds one archive per group (severity, month or all), each
document's result files under `<document name>/`, and manifest.json, written last. The writer:

- selects the pair's completed tasks of the chosen severities with one set-based statement into a
  temporary table, then reads them ordered by archive through a server-side cursor, so memory does not
  grow with the corpus;
- copies each result member's compressed bytes as they are (no inflate, no deflate);
- writes every archive as `.<name>.part` and renames it into place when it is whole, beside a sidecar
  `.<name>.documents.jsonl` listing its documents; a run that stops midway leaves no complete-looking
  half archive, and running the same request again keeps the archives already whole (when the plan
  `.plan.json`, the request and the per-archive counts, is unchanged) and writes the others.
"""

# ruff: noqa: S608  (the statements are built of fixed text: group expressions chosen from _GROUP_SQL; values are parameters)
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from conversion.choices import COMPLETED_NAMES
from conversion.zips import ZipOut
from corpora.choices import ExportGrouping
from corpora.export.queries import EXPORT_SEVERITIES, MANIFEST, PLAN, export_dir_check, plan_read
from corpora.models import Activation
from corpora.results import result_copy, result_file
from corpora.tables import DOCUMENT_TABLE, TASK_TABLE
from jobs.runner import JobFailed

Progress = Callable[..., None]
Log = Callable[[str], None]

ALL_ARCHIVE = "all"
UNKNOWN_MONTH = "unknown"
_FETCH = 2000

# The month of a document from the arXiv identifier in its name (else its entry), in SQL so the query
# can order by it: new-style 2401.12345 -> 2024-01; old-style math/0601001, math0601001 or
# math.AG/0601001 -> 2006-01 (yy >= 91 -> 19yy); anything else -> unknown.
_NEW_STYLE = r"(?:^|[^0-9])([0-9]{2})(0[1-9]|1[0-2])\.[0-9]{4,5}(?:v[0-9]+)?(?:$|[^0-9])"
_OLD_STYLE = r"^[A-Za-z][A-Za-z-]*(?:\.[A-Za-z]{2})?/?([0-9]{2})(0[1-9]|1[0-2])[0-9]{3}(?:v[0-9]+)?(?:\.|$)"


def _month_sql(column: str) -> str:
    # Each candidate is a subquery over one regexp_match, so each pattern runs once per row, and COALESCE
    # stops at the first that matches.
    new = f"(SELECT '20' || m[1] || '-' || m[2] FROM regexp_match({column}, '{_NEW_STYLE}') AS m)"
    old = (
        f"(SELECT CASE WHEN m[1]::int >= 91 THEN '19' ELSE '20' END || m[1] || '-' || m[2]"
        f" FROM regexp_match({column}, '{_OLD_STYLE}') AS m)"
    )
    return f"{new}, {old}"


MONTH_SQL = f"COALESCE({_month_sql('d.name')}, {_month_sql('d.entry')}, '{UNKNOWN_MONTH}')"
_STATUS_NAME_SQL = "CASE t.status " + " ".join(f"WHEN {v} THEN '{k}'" for k, v in EXPORT_SEVERITIES.items()) + " END"
_GROUP_SQL: dict[str, str] = {
    ExportGrouping.SEVERITY: _STATUS_NAME_SQL,
    ExportGrouping.MONTH: MONTH_SQL,
    ExportGrouping.NONE: f"'{ALL_ARCHIVE}'",
}


class _ListedArchive(TypedDict):
    """An archive as manifest.json lists it."""

    name: str
    group: str
    documents: int
    missing: int
    bytes: int


@dataclass
class _Archive:
    name: str
    planned: int
    documents: int = 0
    missing: int = 0
    kept: bool = False


def _write_replace(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.part")
    part.write_text(text)
    os.replace(part, path)


def _sidecar(directory: Path, archive: str) -> Path:
    return directory / f".{archive}.zip.documents.jsonl"


def _rows_sql(group_by: str) -> str:
    return (
        f"SELECT {_GROUP_SQL[group_by]} AS grp, t.id, t.status, d.name FROM {TASK_TABLE} t"
        f" JOIN {DOCUMENT_TABLE} d ON d.id = t.document_id"
        " WHERE t.corpus_id = %s AND t.service_id = %s AND t.status = ANY(%s)"
    )


def dataset_export_run(
    *, corpus: str, service: str, corpus_id: int, service_id: int, group_by: str, severities: list[str], out: str,
    progress: Progress, log: Log,
) -> dict[str, Any]:  # fmt: skip
    """The export job: plan the archives, write the missing ones, then the manifest."""
    if not Activation.objects.filter(corpus_id=corpus_id, service_id=service_id).exists():
        raise JobFailed(f"The service {service!r} is no longer active on the corpus {corpus!r}.")
    directory = export_dir_check(out)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        statuses = [EXPORT_SEVERITIES[key] for key in severities]
        request = {"corpus": corpus, "service": service, "group_by": group_by, "severities": severities}
        # One transaction: the export's rows are selected once into a temporary table (the group of each
        # computed once), counted for the plan, then streamed in archive order through a server-side cursor.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL work_mem = '64MB'")
                cursor.execute("DROP TABLE IF EXISTS pg_temp.export_rows")
                cursor.execute(
                    f"CREATE TEMP TABLE export_rows ON COMMIT DROP AS {_rows_sql(group_by)}",
                    [corpus_id, service_id, statuses],
                )
                cursor.execute("SELECT grp, count(*) FROM export_rows GROUP BY grp ORDER BY grp")
                planned = {group: count for group, count in cursor.fetchall()}
            archives = _plan(directory, request, planned)
            total = sum(planned.values())
            log(f"{total} documents in {len(archives)} archives; {sum(a.kept for a in archives)} already written")
            progress(0, total, "writing archives")
            _write_archives(directory, archives, corpus_id, service_id, total, progress)
        manifest = _manifest_write(directory, request, archives)
    log(f"wrote {manifest['documents']} documents ({manifest['missing']} missing) to {directory}")
    progress(total, total, "done")
    return {"out": out, **{k: manifest[k] for k in ("documents", "missing", "bytes")}, "archives": len(archives)}


def _plan(directory: Path, request: dict[str, Any], planned: dict[str, int]) -> list[_Archive]:
    """The archives to write; those already whole are kept when the plan (request and counts) is the same."""
    plan = {"request": request, "archives": planned}
    previous = plan_read(directory)
    if previous is not None and previous["request"] != request:
        raise JobFailed(f"{directory.name} holds an export of another request.")
    if previous != plan:
        _clear(directory)
        _write_replace(directory / PLAN, json.dumps(plan))
    archives = [_Archive(name=group, planned=count) for group, count in planned.items()]
    for archive in archives:
        archive.kept = (directory / f"{archive.name}.zip").is_file() and _sidecar(directory, archive.name).is_file()
    return archives


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with open(directory / ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise JobFailed(f"another export is writing {directory.name}") from exc
        yield


def _clear(directory: Path) -> None:
    """Forget an earlier plan's archives: their documents or groups differ from this run's."""
    for path in directory.iterdir():
        if path.name != ".lock" and path.is_file() and (path.suffix in (".zip", ".part", ".jsonl", ".json")):
            path.unlink()


def _write_archives(
    directory: Path, archives: list[_Archive], corpus_id: int, service_id: int, total: int, progress: Progress
) -> None:
    by_name = {archive.name: archive for archive in archives}
    results_dir = settings.RESULTS_DIR
    done = 0
    current: _ArchiveWriter | None = None
    with connection.chunked_cursor() as cursor:  # server-side: rows arrive in batches, ordered by archive
        # Task order within an archive: result files are named by task id, so the files are read in the
        # order they were written (name order scattered the reads of a grouping by severity).
        cursor.execute("SELECT grp, id, status, name FROM export_rows ORDER BY grp, id")
        while rows := cursor.fetchmany(_FETCH):
            for group, task_id, status, name in rows:
                archive = by_name[group]
                done += 1
                if archive.kept:
                    continue
                if current is None or current.archive is not archive:
                    if current is not None:
                        current.finish()
                    current = _ArchiveWriter(directory, archive)
                current.add(name, COMPLETED_NAMES[status], result_file(results_dir, corpus_id, service_id, task_id))
                progress(done, total)
    if current is not None:
        current.finish()
    for archive in archives:  # counts of the kept archives, from their sidecars
        if archive.kept:
            with _sidecar(directory, archive.name).open() as lines:
                for line in lines:
                    archive.documents += 1
                    archive.missing += json.loads(line)["missing"]
            archive.documents -= archive.missing


class _ArchiveWriter:
    """One archive being written under its temporary name, and its documents' sidecar."""

    def __init__(self, directory: Path, archive: _Archive) -> None:
        self.archive = archive
        self.path = directory / f"{archive.name}.zip"
        self.part = directory / f".{archive.name}.zip.part"
        self.sidecar = _sidecar(directory, archive.name)
        self.sidecar_part = self.sidecar.with_name(self.sidecar.name + ".part")
        self.zip = ZipOut(self.part)
        self.lines = self.sidecar_part.open("w")
        self.archive_json = json.dumps(self.path.name)

    def add(self, name: str, status: str, source: str) -> None:
        """Copy a document's result members under `<name>/`; a result that is absent or unreadable is
        listed as missing, and whatever of it was copied is cut off again."""
        mark = self.zip.mark()
        try:
            result_copy(source, self.zip, f"{name}/")
            missing = False
        except (OSError, zipfile.BadZipFile, EOFError, struct.error, zlib.error, RuntimeError):
            missing = True
            self.zip.rollback(mark)
        self.archive.documents += not missing
        self.archive.missing += missing
        self.lines.write(
            f'{{"document": {json.dumps(name)}, "status": "{status}", "archive": {self.archive_json},'
            f' "missing": {"true" if missing else "false"}}}\n'
        )

    def finish(self) -> None:
        self.zip.close()
        self.lines.close()
        # The sidecar first: an archive in place always has its document list beside it.
        os.replace(self.sidecar_part, self.sidecar)
        os.replace(self.part, self.path)


def _manifest_write(directory: Path, request: dict[str, Any], archives: list[_Archive]) -> dict[str, Any]:
    """manifest.json, streamed from the sidecars (its document list can be long), then renamed into place."""
    listed: list[_ListedArchive] = [
        {"name": f"{a.name}.zip", "group": a.name, "documents": a.documents, "missing": a.missing,
         "bytes": (directory / f"{a.name}.zip").stat().st_size}
        for a in archives
    ]  # fmt: skip
    summary = {
        **request,
        "created_at": timezone.now().isoformat(),
        "documents": sum(a.documents for a in archives),
        "missing": sum(a.missing for a in archives),
        "bytes": sum(a["bytes"] for a in listed),
        "archives": listed,
    }
    part = directory / f".{MANIFEST}.part"
    with part.open("w") as out:
        out.write(json.dumps(summary)[:-1] + ', "document_list": [')
        first = True
        for archive in archives:
            with _sidecar(directory, archive.name).open() as lines:
                for line in lines:
                    out.write(("" if first else ",") + "\n" + line.rstrip("\n"))
                    first = False
        out.write("\n]}\n")
    os.replace(part, directory / MANIFEST)
    return summary
