"""Result archives on disk: where a task's result ZIP is kept, and their removal when the tasks go.

Layout: RESULTS_DIR/<corpus id>/<service id>/<task id>.zip. Ids are never reused, so a directory
left behind could never be mistaken for a new corpus's, but it would fill the disk: deleting a
corpus, a service or a (corpus, service) pair removes its directories after the database commit.
The directories are counted, renamed into RESULTS_DIR/.discarded once the deletion commits (one
rename each, so they leave the live tree at once), and then removed: inline when there are few files, by a background
job when there are many, so a request never spends minutes unlinking files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from jobs.actions import job_enqueue, job_send
from jobs.choices import JobKinds

DISCARDED = ".discarded"


@dataclass(frozen=True)
class Discarded:
    """What a deletion did to the result archives: how many files, and the job removing them if any."""

    files: int
    job_uuid: str | None = None

    def counts(self) -> dict[str, int | str | None]:
        """The figures a deletion reports: files removed (or being removed) and the removing job."""
        return {"result_files": self.files, "result_files_job": self.job_uuid}


def result_path(results_dir: Path, corpus_id: int, service_id: int, task_id: int) -> Path:
    """Where the result archive of a task is kept (for the document report and export)."""
    return results_dir / str(corpus_id) / str(service_id) / f"{task_id}.zip"


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
