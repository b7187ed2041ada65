"""Walking a corpus directory on the server: confinement to the corpus roots and entry inspection."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from django.conf import settings

from config.errors import Unprocessable
from conversion.archive import Entry, inspect_entry


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
    """The entries of a corpus directory, hidden ones left out, in a stable order."""
    with os.scandir(directory) as entries:
        return sorted(entry.name for entry in entries if not entry.name.startswith("."))


def scan(directory: Path, names: list[str], progress: Callable[[int, int], None]) -> Iterator[Entry]:
    """Inspect each entry, read confined to the corpus roots: one that leads outside them is invalid."""
    total = len(names)
    for index, name in enumerate(names, start=1):
        yield inspect_entry(directory / name, name, roots=settings.CORPUS_ROOTS)
        if index % 500 == 0 or index == total:
            progress(index, total)
