"""Corpus entries: what kind each is and which file is its main TeX source. Pure library (no Django):
the importer uses it on the server and the worker uses it on the unpacked payload.

An entry is a sub-directory with a main .tex, a lone .tex file, a .zip, or an arXiv-style .tar.gz /
.tgz / .gz. The main file is the only .tex when there is one, else the one with \\documentclass
(or, failing that, \\begin{document}). An unusable entry is described, never raised.
"""

from __future__ import annotations

import gzip
import os
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from conversion.zips import zip_build

# How much of a .tex file is read to look for \documentclass; preambles are short.
HEAD_BYTES = 64 * 1024
_DOCUMENTCLASS = re.compile(rb"^[^%\n]*\\document(?:class|style)\b", re.MULTILINE)
_BEGIN_DOCUMENT = re.compile(rb"^[^%\n]*\\begin\s*\{document\}", re.MULTILINE)
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip", ".gz")
_MAX_MEMBERS = 20_000


@dataclass(frozen=True)
class Entry:
    """What the importer records for one entry; `problem` is set (and main_file empty) when unusable."""

    name: str
    entry: str
    kind: str
    main_file: str = ""
    problem: str = ""
    detail: str = ""


def document_name(entry_name: str) -> str:
    """The short name of a document: the entry name without its archive or .tex suffix."""
    lowered = entry_name.lower()
    for suffix in (*_ARCHIVE_SUFFIXES, ".tex"):
        if lowered.endswith(suffix) and len(entry_name) > len(suffix):
            return entry_name[: -len(suffix)]
    return entry_name


def choose_main(candidates: list[str], head: Callable[[str], bytes]) -> str | None:
    """Pick the main file among .tex paths; `head(path)` returns the first bytes of a file."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    # Prefer files nearest the top of the tree, then by name, so the choice is deterministic.
    ordered = sorted(candidates, key=lambda p: (p.count("/"), p))
    heads = {path: head(path) for path in ordered}
    with_class = [p for p in ordered if _DOCUMENTCLASS.search(heads[p])]
    if len(with_class) > 1:
        both = [p for p in with_class if _BEGIN_DOCUMENT.search(heads[p])]
        with_class = both or with_class
    if with_class:
        return with_class[0]
    with_begin = [p for p in ordered if _BEGIN_DOCUMENT.search(heads[p])]
    return with_begin[0] if with_begin else None


def _is_tex(name: str) -> bool:
    return name.lower().endswith(".tex")


def _unsafe_member(name: str) -> bool:
    path = PurePosixPath(name.replace("\\", "/"))
    return path.is_absolute() or ".." in path.parts or (len(name) > 1 and name[1] == ":")


def inspect_directory(path: Path, entry: str) -> Entry:
    candidates: list[str] = []
    for root, dirs, files in os.walk(path, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel_root = os.path.relpath(root, path)
        for file in files:
            # Only regular files: opening a FIFO or device named *.tex would block or worse.
            if _is_tex(file) and os.path.isfile(os.path.join(root, file)):
                candidates.append(file if rel_root == "." else f"{rel_root}/{file}")

    def head(rel: str) -> bytes:
        with open(path / rel, "rb") as handle:
            return handle.read(HEAD_BYTES)

    main = choose_main(candidates, head)
    if main is None:
        why = "no .tex file" if not candidates else "several .tex files and none has \\documentclass"
        return Entry(document_name(entry), entry, "dir", problem="no_main_file", detail=why)
    return Entry(document_name(entry), entry, "dir", main_file=main)


def inspect_zip(path: Path, entry: str) -> Entry:
    name = document_name(entry)
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            if len(members) > _MAX_MEMBERS:
                return Entry(name, entry, "zip", problem="archive", detail=f"more than {_MAX_MEMBERS} members")
            unsafe = [m.filename for m in members if _unsafe_member(m.filename)]
            if unsafe:
                return Entry(name, entry, "zip", problem="unsafe_archive", detail=f"member escapes: {unsafe[0]}")
            candidates = [m.filename for m in members if _is_tex(m.filename)]

            def head(member: str) -> bytes:
                with archive.open(member) as handle:
                    return handle.read(HEAD_BYTES)

            main = choose_main(candidates, head)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        return Entry(name, entry, "zip", problem="archive", detail=f"unreadable zip: {exc}")
    if main is None:
        return Entry(name, entry, "zip", problem="archive", detail="no main .tex file in the archive")
    return Entry(name, entry, "zip", main_file=main)


def inspect_tar(path: Path, entry: str, kind: str) -> Entry | None:
    """A gzipped tar; None when the file is gzip but not a tar (a single gzipped .tex)."""
    name = document_name(entry)
    try:
        with tarfile.open(path, "r:gz") as archive:
            members = []
            for member in archive:
                if len(members) >= _MAX_MEMBERS:
                    return Entry(name, entry, kind, problem="archive", detail=f"more than {_MAX_MEMBERS} members")
                if member.isfile():
                    members.append(member)
                elif (member.issym() or member.islnk()) and _unsafe_member(member.linkname):
                    return Entry(name, entry, kind, problem="unsafe_archive", detail=f"link escapes: {member.name}")
            unsafe = [m.name for m in members if _unsafe_member(m.name)]
            if unsafe:
                return Entry(name, entry, kind, problem="unsafe_archive", detail=f"member escapes: {unsafe[0]}")
            candidates = [m.name for m in members if _is_tex(m.name)]

            def head(member: str) -> bytes:
                handle = archive.extractfile(member)
                return handle.read(HEAD_BYTES) if handle else b""

            main = choose_main(candidates, head)
    except tarfile.ReadError:
        return None
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        return Entry(name, entry, kind, problem="archive", detail=f"unreadable archive: {exc}")
    if main is None:
        return Entry(name, entry, kind, problem="archive", detail="no main .tex file in the archive")
    return Entry(name, entry, kind, main_file=main)


def inspect_gz(path: Path, entry: str) -> Entry:
    """arXiv's .gz is either a gzipped tar or a single gzipped .tex file."""
    as_tar = inspect_tar(path, entry, "gz")
    if as_tar is not None:
        return as_tar
    name = document_name(entry)
    try:
        with gzip.open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
    except (OSError, EOFError) as exc:
        return Entry(name, entry, "gz", problem="archive", detail=f"unreadable gzip: {exc}")
    if b"\x00" in head:
        return Entry(name, entry, "gz", problem="binary", detail="the gzipped file is binary, not TeX")
    return Entry(name, entry, "gz", main_file=f"{name}.tex")


def inspect_entry(path: Path, entry: str) -> Entry:
    """Describe one entry of a corpus directory. Never raises for a bad entry."""
    lowered = entry.lower()
    try:
        if path.is_dir():
            return inspect_directory(path, entry)
        if not path.is_file():
            if not path.exists():
                return Entry(document_name(entry), entry, "unknown", problem="unreadable", detail="dangling link")
            return Entry(document_name(entry), entry, "other", problem="unsupported", detail="not a regular file")
        if lowered.endswith(".tex"):
            with open(path, "rb") as handle:
                head = handle.read(HEAD_BYTES)
            if b"\x00" in head:
                return Entry(document_name(entry), entry, "tex", problem="binary", detail="the file is binary, not TeX")
            return Entry(document_name(entry), entry, "tex", main_file=entry)
        if lowered.endswith(".zip"):
            return inspect_zip(path, entry)
        if lowered.endswith((".tar.gz", ".tgz")):
            return inspect_tar(path, entry, "tar.gz") or Entry(
                document_name(entry), entry, "tar.gz", problem="archive", detail="not a gzipped tar archive"
            )
        if lowered.endswith(".gz"):
            return inspect_gz(path, entry)
    except PermissionError as exc:
        return Entry(document_name(entry), entry, "unknown", problem="unreadable", detail=str(exc))
    except OSError as exc:
        return Entry(document_name(entry), entry, "unknown", problem="unreadable", detail=str(exc))
    return Entry(document_name(entry), entry, "other", problem="unsupported", detail="not a directory, .tex or archive")


# --- payloads: a document packed as a ZIP for a worker ---------------------------------------------

PAYLOAD_MAX_BYTES = 512 * 1024 * 1024


def pack_entry(path: Path, kind: str, entry: str) -> bytes:
    """The document at `path` as ZIP bytes, as workers expect it: a directory's files, a lone .tex, a
    .zip as it is, a tar or gzipped .tex repacked. Unsafe archive members and links out of the entry
    are left out. Raises OSError / ValueError for an entry that cannot be packed."""
    if kind == "zip":
        return path.read_bytes()
    if kind == "tex":
        members = [_file_member(str(path), entry)]
    elif kind == "dir":
        members = list(_directory_members(path))
    elif kind in ("tar.gz", "gz"):
        members = _gzip_members(path, document_name(entry))
    else:
        raise ValueError(f"cannot pack an entry of kind {kind!r}")
    data = zip_build(members)
    if len(data) > PAYLOAD_MAX_BYTES:
        raise ValueError(f"the packed document is larger than {PAYLOAD_MAX_BYTES} bytes")
    return data


def _file_member(path: str, name: str) -> tuple[str, bytes, float]:
    with open(path, "rb") as handle:
        return name, handle.read(), os.fstat(handle.fileno()).st_mtime


def _directory_members(path: Path) -> Iterator[tuple[str, bytes, float]]:
    base = path.resolve()
    for root, dirs, files in os.walk(path, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file in files:
            full = Path(root) / file
            if full.is_symlink() and not full.resolve().is_relative_to(base):
                continue
            if full.is_file():
                yield _file_member(str(full), full.relative_to(path).as_posix())


def _gzip_members(path: Path, name: str) -> list[tuple[str, bytes, float]]:
    try:
        with tarfile.open(path, "r:gz") as tar:
            members = []
            for member in tar:
                if member.isfile() and not _unsafe_member(member.name):
                    handle = tar.extractfile(member)
                    if handle is not None:
                        members.append((member.name, handle.read(), member.mtime))
            return members
    except tarfile.ReadError:
        pass
    with gzip.open(path, "rb") as handle:
        return [(f"{name}.tex", handle.read(), path.stat().st_mtime)]
