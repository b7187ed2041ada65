"""Walking a corpus directory on the server: confinement to the corpus roots and entry inspection."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings

from config.errors import Unprocessable
from conversion.archive import ARCHIVE_SUFFIXES, Entry, inspect_entry

logger = logging.getLogger(__name__)

# arXiv keeps its sources as YYMM/<id>.gz: a directory of four digits is a month of documents, not one.
_MONTH = re.compile(r"[0-9]{4}")
# Imports of more entries than this are inspected in chunks of this many, each in a process of its own
# (`conversion.inspector`): a process starts in ~60 ms.
INSPECT_CHUNK = 10_000
# Processes inspecting at once: four a core, as many as 32. An entry that is not in the page cache waits
# on the disk for most of its time, and more processes than cores keep the disk and the cores busy
# together; with the entries in the cache they are as fast as one a core (bench/README.md, "Corpora").
INSPECT_PROCESSES = min(4 * (os.cpu_count() or 1), 32)
_INSPECT_TIMEOUT_SECONDS = 3600


def within_roots(path: Path, roots: list[Path] | None = None) -> bool:
    resolved = path.resolve()
    return any(resolved == root or resolved.is_relative_to(root) for root in (roots or settings.CORPUS_ROOTS))


def corpus_path_check(raw: object) -> Path:
    """The resolved directory for an import: readable, and inside a configured corpus root."""
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise Unprocessable("path must be a non-empty directory path on the server.", errors={"path": ["required"]})
    candidate = Path(raw)
    if not candidate.is_absolute():
        candidate = settings.CORPUS_ROOTS[0] / candidate
    try:
        resolved = candidate.resolve()
        is_directory = resolved.is_dir()
    except (OSError, RuntimeError) as exc:  # name too long, symlink loop, ...
        reason = getattr(exc, "strerror", None) or str(exc)
        raise Unprocessable(f"The path cannot be used: {reason}.", errors={"path": ["unusable path"]}) from exc
    if not within_roots(resolved):
        roots = ", ".join(str(root) for root in settings.CORPUS_ROOTS)
        raise Unprocessable(
            f"{raw} lies outside the corpus roots ({roots}); symlinks are resolved before this check.",
            errors={"path": ["outside the corpus roots"]},
        )
    if not is_directory:
        raise Unprocessable(f"{raw} is not a directory on the server.", errors={"path": ["not a directory"]})
    if resolved in settings.CORPUS_ROOTS:
        # A root holds the other corpora's directories: as a corpus it would take them all as documents.
        raise Unprocessable(
            f"{raw} is a corpus root itself; import one of the directories inside it.",
            errors={"path": ["a corpus root itself"]},
        )
    try:
        with os.scandir(resolved) as entries:
            next(entries, None)
    except OSError as exc:
        raise Unprocessable(f"{raw} cannot be read: {exc.strerror}.", errors={"path": ["not readable"]}) from exc
    return resolved


def entry_names(directory: Path) -> list[str]:
    """The entries of a corpus directory, hidden ones left out, in a stable order. A month directory of
    arXiv's layout (named YYMM, holding at least one archive and no .tex file of its own) is a folder
    of documents: its entries are listed as `YYMM/<entry>`. A link is never followed into one."""
    names = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            inner = _month_entries(entry)
            if inner is None:
                names.append(entry.name)
            else:
                names.extend(f"{entry.name}/{name}" for name in inner)
    return sorted(names)


def _month_entries(entry: os.DirEntry[str]) -> list[str] | None:
    """The visible entries of `entry` when it is an arXiv month directory, else None."""
    if not _MONTH.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
        return None
    with os.scandir(entry.path) as inside:
        names = [item.name for item in inside if not item.name.startswith(".")]
    lowered = [name.lower() for name in names]
    if any(name.endswith(".tex") for name in lowered) or not any(name.endswith(ARCHIVE_SUFFIXES) for name in lowered):
        return None
    return names


def scan(
    directory: Path, names: list[str], progress: Callable[[int, int], None], *, chunk: int = INSPECT_CHUNK
) -> Iterator[Entry]:
    """Inspect each entry, read confined to the corpus roots: one that leads outside them is invalid.
    More than `chunk` entries are inspected in chunks, in INSPECT_PROCESSES parallel processes, and
    yielded in order."""
    total = len(names)
    roots = list(settings.CORPUS_ROOTS)
    if total <= chunk:
        for index, name in enumerate(names, start=1):
            yield inspect_entry(directory / name, name, roots=roots)
            if index % 500 == 0 or index == total:
                progress(index, total)
        return
    chunks = [names[start : start + chunk] for start in range(0, total, chunk)]
    done = 0
    with ThreadPoolExecutor(max_workers=INSPECT_PROCESSES) as pool:
        # map keeps the order and runs ahead by the pool's width.
        for inspected in pool.map(lambda part: _inspect_apart(directory, part, roots), chunks):
            yield from inspected
            done += len(inspected)
            progress(done, total)


def _inspect_apart(directory: Path, names: list[str], roots: list[Path]) -> list[Entry]:
    """`names` inspected by `python -m conversion.inspector`; in this process when that fails."""
    request = json.dumps({"directory": str(directory), "roots": [str(root) for root in roots], "names": names})
    try:
        done = subprocess.run(
            [sys.executable, "-m", "conversion.inspector"], input=request.encode(), capture_output=True,
            timeout=_INSPECT_TIMEOUT_SECONDS, check=True,
        )  # fmt: skip
        return [Entry(*fields) for fields in json.loads(done.stdout)]
    except (OSError, subprocess.SubprocessError, ValueError, TypeError) as exc:
        detail = exc.stderr.decode(errors="replace")[-500:] if isinstance(exc, subprocess.CalledProcessError) else ""
        logger.warning("inspecting %d entries in a process of their own failed (%s %s); inspecting them here",
                       len(names), exc, detail)  # fmt: skip
        return [inspect_entry(directory / name, name, roots=roots) for name in names]
