"""Reads of dataset exports: the export root and the directory an `out` names, an export's plan, and the
finished exports (a directory with its manifest.json) with their files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from django.conf import settings

from config.errors import NotFound, Unprocessable
from conversion.choices import COMPLETED_NAMES
from corpora.statuses import SEVERITIES

# The severity keys of an export: the completed statuses (not `info`, which spans them all).
EXPORT_SEVERITIES: dict[str, int] = {name: SEVERITIES[name][0][0] for name in COMPLETED_NAMES.values()}
OUT_RULE = "letters, digits, '.', '_', '+' and '-', starting with a letter or digit, at most 200 characters"
_OUT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
MANIFEST = "manifest.json"
PLAN = ".plan.json"


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


def plan_read(directory: Path) -> dict[str, Any] | None:
    try:
        plan: dict[str, Any] = json.loads((directory / PLAN).read_text())
    except (OSError, ValueError):
        return None
    return plan


def export_summaries() -> list[dict[str, Any]]:
    """Every finished export (a directory with its manifest.json), newest first, without document lists;
    each archive with the `out` it lies in (ExportSerializer links them)."""
    root = export_root()
    found = []
    for manifest in root.glob(f"*/{MANIFEST}") if root.is_dir() else []:
        summary = _summary_read(manifest)
        if summary is not None:
            out = manifest.parent.name
            for archive in summary["archives"]:
                archive["out"] = out
            found.append({"out": out, **summary})
    return sorted(found, key=lambda s: s["created_at"], reverse=True)


def _summary_read(manifest: Path) -> dict[str, Any] | None:
    """The manifest without its document list (read whole: the summary comes first, but JSON has no
    partial parse in the standard library, and the screens list few exports)."""
    try:
        data: dict[str, Any] = json.loads(manifest.read_text())
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
