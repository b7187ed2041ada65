"""Dataset export: ZIP archives of a pair's already-converted results, written server-side under EXPORT_ROOT.

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
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from accounts.actions import journaled
from accounts.journal import Action
from config.errors import Conflict, NotFound, Unprocessable
from corpora.export.zipcopy import ZipOut, result_copy
from corpora.models import Activation
from corpora.queries import corpus_get
from corpora.results import result_path
from corpora.statuses import COMPLETED_NAMES, SEVERITIES
from jobs.actions import job_enqueue
from jobs.models import Job
from jobs.runner import JobFailed
from services.queries import service_get

Progress = Callable[..., None]
Log = Callable[[str], None]

GROUP_BYS = ("severity", "month", "none")
# The severity keys of an export: the completed statuses (not `info`, which spans them all).
EXPORT_SEVERITIES: dict[str, int] = {name: SEVERITIES[name][0][0] for name in COMPLETED_NAMES.values()}
OUT_RULE = "letters, digits, '.', '_', '+' and '-', starting with a letter or digit, at most 200 characters"
_OUT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
MANIFEST = "manifest.json"
PLAN = ".plan.json"
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
_GROUP_SQL = {"severity": _STATUS_NAME_SQL, "month": MONTH_SQL, "none": f"'{ALL_ARCHIVE}'"}


# --- the request ---------------------------------------------------------------------------------------


def export_root() -> Path:
    return Path(settings.EXPORT_ROOT).resolve()


def export_dir_check(out: str) -> Path:
    """EXPORT_ROOT/<out>, or Unprocessable: one plain name, no '..', nothing resolving (symlinks
    included) outside the root."""

    def refuse(reason: str) -> Unprocessable:
        return Unprocessable(f"out {out!r} is refused: {reason}.", errors={"out": [reason]})

    if out.startswith(("/", "\\")) or os.path.isabs(out):
        raise refuse("it must be a directory name inside the export root, not an absolute path")
    if ".." in re.split(r"[/\\]", out):
        raise refuse("it must not hold '..'")
    if not _OUT_PATTERN.fullmatch(out):
        raise refuse(f"a directory name is {OUT_RULE}")
    root = export_root()
    path = (root / out).resolve()
    if path.parent != root:
        raise refuse("it resolves outside the export root")
    return path


def export_request_check(
    *, corpus: str, service: str, group_by: str, severities: list[str], out: str | None
) -> dict[str, Any]:
    """Everything a request can get wrong, checked before any job starts; the job's params."""
    corpus_row, service_row = corpus_get(corpus), service_get(service)
    if not Activation.objects.filter(corpus=corpus_row, service=service_row).exists():
        raise NotFound(f"The service {service!r} is not active on the corpus {corpus!r}.")
    problems: dict[str, list[str]] = {}
    if group_by not in GROUP_BYS:
        problems["group_by"] = [f"one of {', '.join(GROUP_BYS)}"]
    unknown = [key for key in severities if key not in EXPORT_SEVERITIES]
    if unknown or not severities:
        problems["severities"] = [f"a non-empty list of {', '.join(EXPORT_SEVERITIES)}"]
    if problems:
        raise Unprocessable("The export request has invalid fields.", errors=problems)
    out = out or f"{corpus}-{service}-{timezone.now():%Y%m%dT%H%M%S%fZ}"
    directory = export_dir_check(out)
    request = {
        "corpus": corpus,
        "service": service,
        "group_by": group_by,
        "severities": [key for key in EXPORT_SEVERITIES if key in severities],
    }
    existing = _plan_read(directory)
    if existing is not None and existing["request"] != request:
        raise Conflict(f"The export directory {out!r} holds an export of another request; choose another out.")
    return {**request, "out": out, "corpus_id": corpus_row.pk, "service_id": service_row.pk}


@journaled(Action.CORPUS_EXPORT, target="{corpus}/{service}")
def dataset_export(
    *, corpus: str, service: str, group_by: str, severities: list[str], actor: str, out: str | None = None,
    send: bool = True,
) -> Job:  # fmt: skip
    """Check the request and enqueue the export job (202 with its record)."""
    params = export_request_check(corpus=corpus, service=service, group_by=group_by, severities=severities, out=out)
    job, _ = job_enqueue(kind="dataset_export", actor=actor, params=params, send=send)
    return job


# --- the job -------------------------------------------------------------------------------------------


@dataclass
class _Archive:
    name: str
    planned: int
    documents: int = 0
    missing: int = 0
    kept: bool = False


def _plan_read(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / PLAN).read_text())
    except (OSError, ValueError):
        return None


def _write_replace(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.part")
    part.write_text(text)
    os.replace(part, path)


def _sidecar(directory: Path, archive: str) -> Path:
    return directory / f".{archive}.zip.documents.jsonl"


def _rows_sql(group_by: str) -> str:
    return (
        f"SELECT {_GROUP_SQL[group_by]} AS grp, t.id, t.status, d.name FROM corpora_task t"
        " JOIN corpora_document d ON d.id = t.document_id"
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
    previous = _plan_read(directory)
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
    # Every result of the pair lives in one directory (corpora.results): its path as text, joined per task.
    results = str(result_path(Path(settings.RESULTS_DIR), corpus_id, service_id, 0).parent) + os.sep
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
                current.add(name, COMPLETED_NAMES[status], f"{results}{task_id}.zip")
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
    listed = [
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


# --- finished exports ----------------------------------------------------------------------------------


def export_summaries() -> list[dict[str, Any]]:
    """Every finished export (a directory with its manifest.json), newest first, without document lists."""
    root = export_root()
    found = []
    for manifest in root.glob(f"*/{MANIFEST}") if root.is_dir() else []:
        summary = _summary_read(manifest)
        if summary is not None:
            out = manifest.parent.name
            for archive in summary["archives"]:
                archive["url"] = reverse("api-export-file", kwargs={"out": out, "name": archive["name"]})
            manifest_url = reverse("api-export-file", kwargs={"out": out, "name": MANIFEST})
            found.append({"out": out, **summary, "manifest_url": manifest_url})
    return sorted(found, key=lambda s: s["created_at"], reverse=True)


def _summary_read(manifest: Path) -> dict[str, Any] | None:
    """The manifest without its document list (read whole: the summary comes first, but JSON has no
    partial parse in the standard library, and the screens list few exports)."""
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return None
    data.pop("document_list", None)
    return data


def export_file(out: str, name: str) -> Path:
    """A finished export's archive or manifest, or NotFound; never a path outside EXPORT_ROOT."""
    try:
        directory = export_dir_check(out)
    except Unprocessable as exc:
        raise NotFound(f"No export {out!r}.") from exc
    summary = _summary_read(directory / MANIFEST)
    if summary is None:
        raise NotFound(f"No finished export {out!r}.")
    allowed = {archive["name"] for archive in summary["archives"]} | {MANIFEST}
    path = (directory / name).resolve()
    if name not in allowed or path.parent != directory or not path.is_file():
        raise NotFound(f"No file {name!r} in the export {out!r}.")
    return path
