"""The results store: where a task's result ZIP is kept, writing it, reading a member and finding the
converted paper (its HTML) for the document screens and the reader, copying it into a dataset export, and
removing the archives of deleted tasks. Every other module goes through these functions; the ZIP records
are conversion.zips's.

Layout: RESULTS_DIR/<corpus id>/<service id>/<task id>.zip. Ingestion writes each archive whole on one
writer thread, beside the transaction that sets its task's status (docs/decisions/result-files.md).
Ids are never reused, so a directory left behind could never be mistaken for a new corpus's, but it would
fill the disk: deleting a corpus, a service or a (corpus, service) pair removes its directories after the
database commit. The directories are counted, renamed into RESULTS_DIR/.discarded once the deletion
commits (one rename each, so they leave the live tree at once), and then removed: inline when there are
few files, by a background job when there are many, so a request never spends minutes unlinking files.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import uuid
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from config.errors import NotFound
from config.live import get_config
from conversion.zips import ZipOut, member_name_safe, zip_copy
from jobs.actions import job_enqueue, job_send
from jobs.choices import JobKinds

DISCARDED = ".discarded"


# --- where an archive lives --------------------------------------------------------------------------


def result_file(results_dir: str | Path, corpus_id: int, service_id: int, task_id: int) -> str:
    """Where the result archive of a task is kept, as the text os calls take (joined without pathlib:
    ingestion and the export ask for every task)."""
    return f"{results_dir}/{corpus_id}/{service_id}/{task_id}.zip"


def result_path(results_dir: str | Path, corpus_id: int, service_id: int, task_id: int) -> Path:
    """result_file as a Path."""
    return Path(result_file(results_dir, corpus_id, service_id, task_id))


def result_stored(corpus_id: int, service_id: int, task_id: int) -> Path | None:
    """The stored result archive of a task under RESULTS_DIR, or None when there is none."""
    path = result_path(settings.RESULTS_DIR, corpus_id, service_id, task_id)
    return path if path.is_file() else None


# --- writing -----------------------------------------------------------------------------------------


def result_file_write(path: str, archive: bytes) -> bool:
    """Write a result file where the document report and export look, with plain os calls (a third of
    pathlib's time). A first result is created in place; one that replaces an earlier result (a rerun) is
    written beside it and renamed over it, so a reader sees the old archive or the new one, never half of
    either. The directory is made when missing; a file that could not be written whole (a full disk) is
    removed. Returns whether the file was created (False: it replaced an earlier one)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    replaces = None
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        replaces, path = path, f"{path}.{os.getpid()}.{next(_TEMPORARY_SEQUENCE)}.tmp"
        fd = os.open(path, flags, 0o644)
    try:
        try:
            view = memoryview(archive)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        if replaces is not None:
            os.replace(path, replaces)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return replaces is None


def result_files_write(results_dir: str | Path, results: list[tuple[int, int, int, bytes]]) -> Future[None]:
    """Write the (corpus id, service id, task id, archive) results on the store's writer thread (system
    calls, without the GIL), beside the caller's statements; the caller waits on the future before it
    commits, so a status never commits ahead of its file."""
    return _file_writer().submit(_files_write, results_dir, results)


def _files_write(results_dir: str | Path, results: list[tuple[int, int, int, bytes]]) -> None:
    created: list[str] = []
    try:
        for corpus_id, service_id, task_id, archive in results:
            path = result_file(results_dir, corpus_id, service_id, task_id)
            if result_file_write(path, archive):
                created.append(path)
    except BaseException:
        # The batch's transaction rolls back (its tasks stay leased): the archives it created go too, so no
        # archive stands beside a task that has no result, and a full disk gets their space back.
        for path in created:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


_TEMPORARY_SEQUENCE = itertools.count()
_WRITER: ThreadPoolExecutor | None = None


def _file_writer() -> ThreadPoolExecutor:
    global _WRITER  # one thread per process, made on first use
    if _WRITER is None:
        _WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="result-files")
    return _WRITER


# --- room on the results volume ----------------------------------------------------------------------

_MB = 1024 * 1024


@dataclass(frozen=True)
class ResultsSpace:
    """The free space of the volume that holds RESULTS_DIR, against RESULTS_MIN_FREE_MB: below it the sink
    takes no result (docs/decisions/full-results-disk.md)."""

    directory: Path
    free_bytes: int | None  # None when the volume cannot be read
    min_free_bytes: int

    @property
    def short(self) -> bool:
        return self.free_bytes is not None and self.free_bytes < self.min_free_bytes

    def describe(self) -> str:
        """The reading in words: "3 MB free under /srv/results, below RESULTS_MIN_FREE_MB (1024)"."""
        free = "unknown" if self.free_bytes is None else f"{self.free_bytes // _MB} MB"
        below = "below" if self.short else "above"
        return f"{free} free under {self.directory}, {below} RESULTS_MIN_FREE_MB ({self.min_free_bytes // _MB})"


def results_space(results_dir: str | Path | None = None) -> ResultsSpace:
    """Free space (statvfs: what an unprivileged writer may use) of the volume of `results_dir` (RESULTS_DIR
    by default; its nearest existing ancestor before the first result made it)."""
    directory = Path(results_dir if results_dir is not None else settings.RESULTS_DIR)
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        stats = os.statvfs(probe)
        free: int | None = stats.f_bavail * stats.f_frsize
    except OSError:
        free = None
    return ResultsSpace(directory, free, get_config().RESULTS_MIN_FREE_MB * _MB)


# --- reading: a member, the paper's HTML -------------------------------------------------------------


def result_html(archive: Path) -> str | None:
    """The converted paper in a result archive: its first .html/.xhtml member with a safe name, or None
    when it holds none or is no readable ZIP (a fatal conversion leaves only its log)."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            names = [info.filename for info in zipped.infolist() if not info.is_dir()]
    except (OSError, zipfile.BadZipFile):
        return None
    return next((name for name in names if name.lower().endswith((".html", ".xhtml")) and member_name_safe(name)), None)


def result_has_html(corpus_id: int, service_id: int, task_id: int) -> bool:
    """Whether the task has a stored result holding HTML: what the document screens show and link to."""
    archive = result_stored(corpus_id, service_id, task_id)
    return archive is not None and result_html(archive) is not None


def result_member(archive: Path, member: str) -> Iterator[bytes]:
    """The content of one member of a stored result, in chunks as it is read, so a large member (or one
    that inflates a lot) never sits in memory whole. NotFound, before any chunk, for a name that
    member_name_safe refuses, a member the archive does not hold, or an archive that is not a ZIP."""
    try:
        if not member_name_safe(member):
            raise KeyError(member)
        with zipfile.ZipFile(archive) as zipped:
            zipped.getinfo(member)
    except (KeyError, zipfile.BadZipFile):
        raise NotFound("No such file in the result.") from None
    return _member_chunks(archive, member)


def _member_chunks(archive: Path, member: str) -> Iterator[bytes]:
    with zipfile.ZipFile(archive) as zipped, zipped.open(member) as stream:
        while chunk := stream.read(64 * 1024):
            yield chunk


# --- the export copy ---------------------------------------------------------------------------------

# Result archives up to this size (nearly all) are read whole in one call and copied from memory (one
# read instead of a dozen seeks and reads through zipfile, which is most of the cost of small results);
# larger ones are read by zipfile in chunks.
_READ_WHOLE = 4 * 1024 * 1024


def result_copy(source: str, target: ZipOut, prefix: str) -> None:
    """Copy the members of the stored result archive `source` (a result_file) into an export archive under
    `prefix`, compressed bytes unchanged (conversion.zips.zip_copy: no directories, encrypted members or
    unsafe names). An absent or unreadable archive raises OSError, zipfile.BadZipFile or what zipfile lets
    through, possibly after some members were written."""
    with open(source, "rb", buffering=0) as stream:
        data = stream.read() if os.fstat(stream.fileno()).st_size <= _READ_WHOLE else None
    zip_copy(source if data is None else data, target, prefix)


# --- removal -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Discarded:
    """What a deletion did to the result archives: how many files, and the job removing them if any."""

    files: int
    job_uuid: str | None = None

    def counts(self) -> dict[str, int | str | None]:
        """The figures a deletion reports: files removed (or being removed) and the removing job."""
        return {"result_files": self.files, "result_files_job": self.job_uuid}


def results_discard(*, corpus_id: int | None = None, service_id: int | None = None, actor: str) -> Discarded:
    """Remove the result directories of a corpus, a service (in every corpus) or one pair once the
    surrounding transaction commits (at once outside one); returns how many files they hold."""
    results_dir = Path(settings.RESULTS_DIR)
    if corpus_id is not None and service_id is not None:
        found = [results_dir / str(corpus_id) / str(service_id)]
    elif corpus_id is not None:
        found = [results_dir / str(corpus_id)]
    elif service_id is not None:
        found = list(results_dir.glob(f"[0-9]*/{service_id}"))
    else:
        raise ValueError("name a corpus, a service or both")
    found = [path for path in found if path.is_dir() and not path.is_symlink()]
    if not found:
        return Discarded(files=0)
    files = sum(_file_count(path) for path in found)
    moves = [
        (path, f"{uuid.uuid4().hex}-{path.relative_to(results_dir).as_posix().replace('/', '-')}") for path in found
    ]
    names = [name for _path, name in moves]
    job = None
    if files > settings.RESULTS_REMOVE_INLINE:
        job, _ = job_enqueue(
            kind=JobKinds.RESULTS_REMOVE, actor=actor, params={"names": names, "files": files}, send=False
        )

    def move_and_remove() -> None:
        for path, name in moves:
            _move_aside(path, results_dir / DISCARDED / name)
        if job is None:
            discarded_remove(names=names)
        else:
            job_send(job.pk)

    transaction.on_commit(move_and_remove)
    return Discarded(files=files, job_uuid=str(job.uuid) if job else None)


def discarded_remove(*, names: list[str], progress: Callable[..., None] | None = None) -> int:
    """Remove directories moved aside by results_discard (only names directly inside .discarded);
    returns how many files were removed."""
    base = Path(settings.RESULTS_DIR) / DISCARDED
    removed = 0
    for index, name in enumerate(names):
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"not a discarded directory name: {name!r}")
        path = base / name
        if not path.is_dir() or path.is_symlink():
            continue
        for root, _dirs, files in os.walk(path, topdown=False):
            for file in files:
                os.unlink(os.path.join(root, file))
                removed += 1
                if progress is not None and removed % 1000 == 0:
                    progress(index, len(names), f"removed {removed} files")
        shutil.rmtree(path, ignore_errors=True)
    if progress is not None:
        progress(len(names), len(names), f"removed {removed} files")
    return removed


def _move_aside(path: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):  # removed meanwhile by a concurrent deletion
        path.rename(target)


def _file_count(path: Path) -> int:
    return sum(len(files) for _root, _dirs, files in os.walk(path))
