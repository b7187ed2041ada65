"""The lines of a document's own TeX source around the places its log messages point to. Pure library (no
Django): the document report (corpora.queries.reports.document_report) calls it on the stored corpus entry.

LaTeXML writes where a message arose as a detail line of the message, from its Locator's toString:
`at FILE; line L col C - line L2 col C2` (or, from stringify, `at FILE; from line L col C to line L2 col
C2`), where FILE is the file's base name only (`sec/intro.tex` shows as `intro.tex`). So a location is
looked up by base name among the entry's own files: a name with a path in it, a base name that no file of
the entry has (a package of TeX Live, a binding `*.ltxml`, a literal string) or that several files share
gives no context; nor does a line the file does not have. The entry is opened as packing opens it
(conversion.archive.source_open: confined to the corpus roots, no link followed out of it, archive members
with unsafe names left out), and every read is bounded: archives of at most ARCHIVE_MAX_BYTES, at most
READ_MAX_BYTES of a file, LINE_KEEP_BYTES of a line and LINE_CHARS characters of it shown.
See docs/decisions/reading-converted-papers.md.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from conversion.archive import (
    _MAX_MEMBERS,
    MALFORMED_ARCHIVE,
    SourceRefused,
    _chunks,
    _directory_files,
    _entry_real,
    _gzip_members,
    _open_inside,
    document_name,
    source_open,
)
from conversion.zips import member_name_safe

# Lines shown before the message's first line and after its last.
LINES_BEFORE = 2
LINES_AFTER = 2
# A range is marked over at most this many lines past its first (the rest is cut off).
SPAN_MAX = 4
# Characters of a line shown; a longer line is shown as a window of this many around the marked column.
LINE_CHARS = 200
# Bytes of a line kept while reading; a longer line is cut here.
LINE_KEEP_BYTES = 16 * 1024
# Bytes of one file read to reach the lines; a line further on gives no context.
READ_MAX_BYTES = 8 * 1024 * 1024
# An archive (tar or ZIP) larger than this on disk is not opened: a tar is read from its start.
ARCHIVE_MAX_BYTES = 32 * 1024 * 1024
_READ_CHUNK = 64 * 1024

# "at FILE; line L[ col C][ - line L2[ col C2]]" (toString) or "at FILE;[ from] line L[ col C][ to line L2[ col C2]]"
# (stringify), a line of the details of its own.
_LOCATION = re.compile(
    r"^at (?P<file>[^;\n]+); (?:from )?line (?P<line>\d{1,9})(?: col (?P<col>\d{1,9}))?"
    r"(?: (?:-|to) line (?P<to_line>\d{1,9})(?: col (?P<to_col>\d{1,9}))?)?\s*$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Location:
    """Where a message arose, as LaTeXML writes it: a file's base name, a line and maybe a column (the
    characters of the line before the place), and for a range its last line and column."""

    file: str
    line: int
    column: int | None = None
    to_line: int | None = None
    to_column: int | None = None

    @property
    def last_line(self) -> int:
        """The last line marked: the range's end, at most SPAN_MAX lines on."""
        end = self.to_line if self.to_line is not None and self.to_line > self.line else self.line
        return min(end, self.line + SPAN_MAX)

    @property
    def first_shown(self) -> int:
        return max(1, self.line - LINES_BEFORE)

    @property
    def last_shown(self) -> int:
        return self.last_line + LINES_AFTER


def location_of(details: str) -> Location | None:
    """The first location in a message's details, or None. A line number 0 (LaTeXML's for input that is no
    file's) is none."""
    found = _LOCATION.search(details)
    if found is None or int(found["line"]) < 1:
        return None
    col, to_line, to_col = (
        int(found[name]) if found[name] is not None else None for name in ("col", "to_line", "to_col")
    )
    return Location(found["file"].strip(), int(found["line"]), col, to_line, to_col)


@dataclass(frozen=True)
class SourceLine:
    """A line of source shown: `text` is at most LINE_CHARS characters of it, starting at character `offset`
    of the line (0 unless a long line is shown around its column); `clipped` when the line goes on."""

    number: int
    text: str
    offset: int
    clipped: bool
    marked: bool


@dataclass(frozen=True)
class SourceContext:
    """The lines around a location, in the file `file` (its path inside the entry)."""

    file: str
    line: int
    column: int | None
    to_line: int | None
    to_column: int | None
    lines: list[SourceLine]


def source_contexts(
    path: Path, kind: str, main_file: str, entry: str, locations: Sequence[Location | None], roots: Sequence[Path]
) -> list[SourceContext | None]:
    """The context of each location (None where there is none), read from the entry at `path` of the given
    kind (dir, tex, zip, tar.gz, gz) in one pass over it. Never raises for an entry that cannot be read:
    its locations have no context."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for location in locations:
        if location is not None and _plain_name(location.file):
            wanted[location.file].update(range(location.first_shown, location.last_shown + 1))
    if not wanted:
        return [None] * len(locations)
    try:
        found = _read_entry(path, kind, main_file, entry, wanted, roots)
    except (SourceRefused, OSError, *MALFORMED_ARCHIVE):
        found = {}
    return [_context(location, found.get(location.file)) if location else None for location in locations]


def _plain_name(name: str) -> bool:
    """A base name as LaTeXML writes one: no directory, no parent, nothing a path could be made of."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\x00")


def _context(location: Location, found: tuple[str, dict[int, bytes]] | None) -> SourceContext | None:
    if found is None or location.line not in found[1]:
        return None
    member, lines = found
    shown = []
    for number in range(location.first_shown, location.last_shown + 1):
        raw = lines.get(number)
        if raw is None:
            break
        text = raw.decode("utf-8", "replace")
        column = location.column if number == location.line else None
        offset = 0
        if len(text) > LINE_CHARS and column is not None:
            offset = max(0, min(column - LINE_CHARS // 2, len(text) - LINE_CHARS))
        clipped = len(text) > offset + LINE_CHARS or len(raw) >= LINE_KEEP_BYTES
        marked = location.line <= number <= location.last_line
        shown.append(SourceLine(number, text[offset : offset + LINE_CHARS], offset, clipped, marked))
    return SourceContext(member, location.line, location.column, location.to_line, location.to_column, shown)


# --- reading the entry ---------------------------------------------------------------------------------


def _read_entry(
    path: Path, kind: str, main_file: str, entry: str, wanted: dict[str, set[int]], roots: Sequence[Path]
) -> dict[str, tuple[str, dict[int, bytes]]]:
    """For each wanted base name held by exactly one file of the entry: that file's path in the entry and
    its wanted lines (number to bytes, without the line end)."""
    matches: dict[str, list[tuple[str, dict[int, bytes]]]] = defaultdict(list)
    fd = source_open(path, roots)
    try:
        status = os.fstat(fd)
        if kind == "dir":
            if not stat.S_ISDIR(status.st_mode):
                return {}
            entry_real = _entry_real(fd, path)
            for relative in islice(_directory_files(entry_real), _MAX_MEMBERS):
                base = relative.rsplit("/", 1)[-1]
                if base in wanted:
                    matches[base].append((relative, {}))
            for base, found in matches.items():
                if len(found) == 1:
                    relative = found[0][0]
                    with os.fdopen(_open_inside(fd, entry_real, relative), "rb") as handle:
                        found[0] = (relative, _lines(_chunks(handle, _READ_CHUNK), wanted[base]))
        elif not stat.S_ISREG(status.st_mode):
            return {}
        elif kind == "tex":
            base = main_file.rsplit("/", 1)[-1]
            if base in wanted:
                with os.fdopen(os.dup(fd), "rb") as handle:
                    matches[base].append((main_file, _lines(_chunks(handle, _READ_CHUNK), wanted[base])))
        elif status.st_size > ARCHIVE_MAX_BYTES:
            return {}
        elif kind == "zip":
            with os.fdopen(os.dup(fd), "rb") as handle, zipfile.ZipFile(handle) as archive:
                for info in islice(archive.infolist(), _MAX_MEMBERS):
                    base = info.filename.rsplit("/", 1)[-1]
                    if base in wanted and not info.is_dir() and member_name_safe(info.filename):
                        with archive.open(info) as member:
                            matches[base].append((info.filename, _lines(_chunks(member, _READ_CHUNK), wanted[base])))
        elif kind in ("tar.gz", "gz"):
            with os.fdopen(os.dup(fd), "rb") as handle:
                members = _gzip_members(handle, document_name(entry), status.st_mtime)
                for name, chunks, _ in islice(members, _MAX_MEMBERS):
                    base = name.rsplit("/", 1)[-1]
                    if base in wanted:
                        matches[base].append((name, _lines(chunks, wanted[base])))
    finally:
        os.close(fd)
    return {base: found[0] for base, found in matches.items() if len(found) == 1}


def _lines(chunks: Iterable[bytes], wanted: set[int]) -> dict[int, bytes]:
    """The wanted lines (1-based) of a file given as chunks, each cut at LINE_KEEP_BYTES and without its
    line end; reading stops after the last wanted line or READ_MAX_BYTES. Chunks before the first wanted
    line are only counted."""
    first, last = min(wanted), max(wanted)
    found: dict[int, bytes] = {}
    number, current, read, ended = 1, bytearray(), 0, False
    iterator: Iterator[bytes] = iter(chunks)
    while number <= last:
        chunk = next(iterator, b"")
        if not chunk:
            ended = True
            break
        chunk = chunk[: READ_MAX_BYTES - read]
        read += len(chunk)
        breaks = chunk.count(b"\n")
        if number + breaks < first:  # no wanted line starts or ends in this chunk
            number += breaks
        else:
            parts = chunk.split(b"\n")
            for index, part in enumerate(parts):
                if index:
                    if number in wanted:
                        found[number] = _line_end_cut(current)
                    number += 1
                    current.clear()
                    if number > last:
                        break
                if number in wanted and len(current) < LINE_KEEP_BYTES:
                    current += part[: LINE_KEEP_BYTES - len(current)]
        if read >= READ_MAX_BYTES:
            break
    # The last line without a line end; or the line the read limit cut, when it is cut at its kept length anyway.
    if number in wanted and current and (ended or len(current) >= LINE_KEEP_BYTES):
        found[number] = _line_end_cut(current)
    return found


def _line_end_cut(line: bytearray) -> bytes:
    return bytes(line[:-1] if line.endswith(b"\r") else line)
