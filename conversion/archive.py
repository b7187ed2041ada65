"""Corpus entries: what kind each is and which file is its main TeX source. Pure library (no Django):
the importer uses it on the server and the worker uses it on the unpacked payload.

An entry is a sub-directory with a main .tex, a lone .tex file, a .zip, or an arXiv-style .tar.gz /
.tgz / .gz. The main file is the only .tex when there is one, else the one with \\documentclass
(or, failing that, \\begin{document}). An unusable entry is described, never raised.
"""

from __future__ import annotations

import errno
import functools
import gzip
import io
import lzma
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

from conversion.zips import ZipTooLarge, member_name_safe, zip_stream

# How much of a .tex file is read to look for \documentclass; preambles are short.
HEAD_BYTES = 64 * 1024
# An archive file up to this size is inflated at once in memory to be inspected (_gunzip_small), if it
# inflates to no more than _GUNZIP_MAX; a larger one is read as a stream.
_GUNZIP_FILE_MAX = 4 * 1024 * 1024
_GUNZIP_MAX = 32 * 1024 * 1024
_DOCUMENTCLASS = re.compile(rb"^[^%\n]*\\document(?:class|style)\b", re.MULTILINE)
# A \documentclass that opens its line: a main file's. One further along a line is more often quoted in text
# (\verb|\documentclass{article}| in a file of macros) than a real one.
_DOCUMENTCLASS_OPENING = re.compile(rb"^[ \t]*\\document(?:class|style)\b", re.MULTILINE)
_BEGIN_DOCUMENT = re.compile(rb"^[^%\n]*\\begin\s*\{document\}", re.MULTILINE)
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip", ".gz")
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
    """The short name of a document: the entry's file name (an entry of an arXiv month directory is
    `YYMM/<file>`) without its archive or .tex suffix."""
    entry_name = _file_name(entry_name)
    lowered = entry_name.lower()
    for suffix in (*ARCHIVE_SUFFIXES, ".tex"):
        if lowered.endswith(suffix) and len(entry_name) > len(suffix):
            return entry_name[: -len(suffix)]
    return entry_name


def _file_name(entry_name: str) -> str:
    """The last part of an entry name: the entry itself, or the file of `YYMM/<file>`."""
    return entry_name.rsplit("/", 1)[-1] or entry_name


def choose_main(candidates: list[str], head: Callable[[str], bytes]) -> str | None:
    """Pick the main file among .tex paths; `head(path)` returns the first bytes of a file."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    # Prefer files nearest the top of the tree, then by name, so the choice is deterministic.
    ordered = sorted(candidates, key=lambda p: (p.count("/"), p))
    heads = {path: head(path) for path in ordered}
    with_class = [p for p in ordered if _DOCUMENTCLASS_OPENING.search(heads[p])]
    with_class = with_class or [p for p in ordered if _DOCUMENTCLASS.search(heads[p])]
    if len(with_class) > 1:
        both = [p for p in with_class if _BEGIN_DOCUMENT.search(heads[p])]
        with_class = both or with_class
    if with_class:
        return with_class[0]
    with_begin = [p for p in ordered if _BEGIN_DOCUMENT.search(heads[p])]
    return with_begin[0] if with_begin else None


def _is_tex(name: str) -> bool:
    return name.lower().endswith(".tex")


# --- reading a source entry: every open of a corpus file goes through source_open ---------------------


class SourceRefused(ValueError):
    """A source entry that is not read or packed; `what` names the reason as an invalid message does
    (unsafe_path, too_large, archive, unsupported)."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(detail)
        self.what = what


# Whatever a damaged archive makes the standard library raise while it is read: tarfile and zipfile wrap
# only part of it, the decompressors (zlib, and lzma/bz2 when tarfile guesses them) raise their own.
MALFORMED_ARCHIVE = (
    tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, struct.error, UnicodeDecodeError,
    ValueError, NotImplementedError, RuntimeError, OverflowError, IndexError, KeyError,
)  # fmt: skip
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def source_open(path: Path, roots: Sequence[Path] | None = None) -> int:
    """A file descriptor on the regular file or directory at `path`, which must lie inside one of `roots`
    (the corpus roots; by default the directory holding `path`). It is opened one component at a time from
    its root's descriptor without following links, so a link swapped in after any check is refused rather
    than followed. A path that holds a link is resolved now and opened the same way along its resolution,
    when that lies inside the roots. Raises SourceRefused, or OSError (FileNotFoundError: dangling, gone)."""
    bases = [_real_root(str(root)) for root in (roots if roots is not None else [path.parent])]
    # Most entries hold no link: their path itself, normalized, is walked; a link met on the way sends
    # the walk to the path's resolution (a link inside the roots is allowed, as import allows it).
    absolute = os.path.abspath(path)
    base = next((base for base in bases if _inside(absolute, base)), None)
    if base is not None:
        try:
            return _open_below(_directory_open(base), _parts_below(absolute, base), path.name)
        except _LinkMet:
            pass
    resolved = os.path.realpath(path)
    base = next((base for base in bases if _inside(resolved, base)), None)
    if base is None:
        raise SourceRefused("unsafe_path", f"{path.name} resolves outside the corpus roots")
    try:
        return _open_below(_directory_open(base), _parts_below(resolved, base), path.name)
    except _LinkMet as exc:  # the resolution has no link: one met now was swapped in since
        raise SourceRefused("unsafe_path", f"{path.name}: a link was swapped in while it was read") from exc


class _LinkMet(SourceRefused):
    def __init__(self) -> None:
        super().__init__("unsafe_path", "a link on the path")


@functools.lru_cache(maxsize=64)
def _real_root(root: str) -> str:
    return os.path.realpath(root)


def _directory_open(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _parts_below(path: str, base: str) -> list[str]:
    return [part for part in path[len(base) :].split("/") if part]


def _open_below(base_fd: int, parts: Sequence[str], shown: str) -> int:
    """Open `parts` below the directory `base_fd` (taken over and closed) following no link (_LinkMet when
    one is there). Directories are opened with O_DIRECTORY | O_NOFOLLOW, which opens nothing else; the last
    component is checked by lstat before its open (no FIFO or device is opened) and by fstat after it (the
    same inode), which closes the window between."""
    fd = base_fd
    try:
        for part in parts[:-1]:
            try:
                opened = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _LinkMet from exc
                raise
            os.close(fd)
            fd = opened
        if not parts:
            return fd
        before = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(before.st_mode):
            raise _LinkMet
        if not stat.S_ISDIR(before.st_mode) and not stat.S_ISREG(before.st_mode):
            raise SourceRefused("unsupported", f"{shown}: not a regular file or directory")
        try:
            opened = os.open(parts[-1], _OPEN_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _LinkMet from exc
            raise
        os.close(fd)
        fd = opened
        after = os.fstat(fd)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise SourceRefused("unsafe_path", f"{shown}: the file was swapped while it was read")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_inside(entry_fd: int, entry_real: str, relative: str) -> int:
    """A file inside a directory entry, a link included only when it resolves inside the entry itself."""
    resolved = os.path.realpath(os.path.join(entry_real, relative))
    if not _inside(resolved, entry_real):
        raise SourceRefused("unsafe_path", f"{relative} leads out of the entry")
    try:
        return _open_below(os.dup(entry_fd), _parts_below(resolved, entry_real), relative)
    except _LinkMet as exc:
        raise SourceRefused("unsafe_path", f"{relative}: a link was swapped in while it was read") from exc


def _directory_files(entry_real: str) -> Iterator[str]:
    """Relative paths of the files of a directory entry (hidden directories left out); opening them goes
    through `_open_inside`, so what the listing names decides nothing."""
    for root, dirs, files in os.walk(entry_real, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel_root = os.path.relpath(root, entry_real)
        for file in sorted(files):
            yield file if rel_root == "." else f"{rel_root}/{file}"


def _entry_real(fd: int, path: Path) -> str:
    """The resolved path of an opened directory entry, from the descriptor (what was opened)."""
    return os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else os.path.realpath(path)


def _read_head(fd: int) -> bytes:
    with os.fdopen(os.dup(fd), "rb") as handle:
        return handle.read(HEAD_BYTES)


# --- inspection ----------------------------------------------------------------------------------------


def inspect_directory(fd: int, path: Path, entry: str) -> Entry:
    entry_real = _entry_real(fd, path)
    candidates: list[str] = []
    for relative in _directory_files(entry_real):
        if not _is_tex(relative):
            continue
        # Only regular files inside the entry: opening a FIFO named *.tex would block, a link out leaks.
        try:
            os.close(_open_inside(fd, entry_real, relative))
        except (SourceRefused, OSError):
            continue
        candidates.append(relative)

    def head(rel: str) -> bytes:
        member = _open_inside(fd, entry_real, rel)
        try:
            return _read_head(member)
        finally:
            os.close(member)

    main = choose_main(candidates, head)
    if main is None:
        why = "no .tex file" if not candidates else "several .tex files and none has \\documentclass"
        return Entry(document_name(entry), entry, "dir", problem="no_main_file", detail=why)
    return Entry(document_name(entry), entry, "dir", main_file=main)


def inspect_zip(handle: BinaryIO, entry: str) -> Entry:
    name = document_name(entry)
    try:
        with zipfile.ZipFile(handle) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            if len(members) > _MAX_MEMBERS:
                return Entry(name, entry, "zip", problem="archive", detail=f"more than {_MAX_MEMBERS} members")
            unsafe = [m.filename for m in members if not member_name_safe(m.filename)]
            if unsafe:
                return Entry(name, entry, "zip", problem="unsafe_archive", detail=f"member escapes: {unsafe[0]}")
            candidates = [m.filename for m in members if _is_tex(m.filename)]

            def head(member: str) -> bytes:
                with archive.open(member) as opened:
                    return opened.read(HEAD_BYTES)

            main = choose_main(candidates, head)
    except (*MALFORMED_ARCHIVE, OSError) as exc:
        return Entry(name, entry, "zip", problem="archive", detail=f"unreadable zip: {_reason(exc)}")
    if main is None:
        return Entry(name, entry, "zip", problem="archive", detail="no main .tex file in the archive")
    return Entry(name, entry, "zip", main_file=main)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _tar_open(handle: BinaryIO, mode: Literal["r:gz", "r:"] = "r:gz") -> tarfile.TarFile | None:
    """The (by default gzipped) tar in `handle`, or None when it does not start as one (a single gzipped
    file, or not gzip at all): tarfile reads the first header when it opens."""
    try:
        return tarfile.open(fileobj=handle, mode=mode)
    except tarfile.ReadError:
        return None
    except (*MALFORMED_ARCHIVE, OSError):
        return None


def _gunzip_small(handle: BinaryIO) -> bytes | None:
    """All of a small gzip file, inflated at once: far quicker than tarfile's and gzip's reads through
    GzipFile for the millions of small archives of an arXiv import. None when the file is larger than
    _GUNZIP_FILE_MAX, inflates past _GUNZIP_MAX, is damaged or holds several gzip members: the
    streaming readers then decide, as they always did. Leaves `handle` at its start."""
    try:
        size = os.fstat(handle.fileno()).st_size
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    if size > _GUNZIP_FILE_MAX:
        return None
    handle.seek(0)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(handle.read(size + 1), _GUNZIP_MAX)
    except zlib.error:
        return None
    finally:
        handle.seek(0)  # where the streaming readers start, whatever the outcome
    if not inflater.eof or inflater.unused_data or inflater.unconsumed_tail:
        return None
    return data


# What tarfile's reading of a number field (tarfile.nti: int(text.strip() or "0", 8) of the ASCII text
# before the first NUL) can accept: octal digits, a sign, an "0o" prefix, underscores and the characters
# str.strip() takes away.
_NUMBER_FIELD_BYTES = b"01234567+-_oO \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def no_tar_header(data: bytes) -> bool:
    """True when `data` cannot start with a tar header that tarfile would read: shorter than one 512-byte
    block, or a checksum field that is not a number. False says nothing (tarfile decides). Three fifths
    of arXiv's entries are a single gzipped .tex, which tarfile takes tens of microseconds to refuse."""
    if len(data) < tarfile.BLOCKSIZE:
        return True
    checksum = data[148:156]
    if checksum[0] in (0o200, 0o377):  # tarfile's base-256 number
        return False
    return bool(checksum.split(b"\x00", 1)[0].translate(None, _NUMBER_FIELD_BYTES))


def inspect_tar(handle: BinaryIO, entry: str, kind: str, *, inflated: bytes | None = None) -> Entry | None:
    """A gzipped tar; None when the file is not a gzipped tar (a single gzipped .tex, or damaged at its
    start). With `inflated` (the whole file inflated) the tar is read from memory."""
    name = document_name(entry)
    if inflated is not None and no_tar_header(inflated):
        return None
    archive = _tar_open(handle) if inflated is None else _tar_open(io.BytesIO(inflated), "r:")
    if archive is None:
        return None
    try:
        with archive:
            members: list[tarfile.TarInfo] = []
            for member in archive:
                if len(members) >= _MAX_MEMBERS:
                    return Entry(name, entry, kind, problem="archive", detail=f"more than {_MAX_MEMBERS} members")
                if member.isfile():
                    members.append(member)
                elif (member.issym() or member.islnk()) and not member_name_safe(member.linkname):
                    return Entry(name, entry, kind, problem="unsafe_archive", detail=f"link escapes: {member.name}")
            unsafe = [m.name for m in members if not member_name_safe(m.name)]
            if unsafe:
                return Entry(name, entry, kind, problem="unsafe_archive", detail=f"member escapes: {unsafe[0]}")
            candidates = [m.name for m in members if _is_tex(m.name)]

            def head(member: str) -> bytes:
                extracted = archive.extractfile(member)
                return extracted.read(HEAD_BYTES) if extracted else b""

            main = choose_main(candidates, head)
    except (*MALFORMED_ARCHIVE, OSError) as exc:
        return Entry(name, entry, kind, problem="archive", detail=f"unreadable archive: {_reason(exc)}")
    if main is None:
        return Entry(name, entry, kind, problem="archive", detail="no main .tex file in the archive")
    return Entry(name, entry, kind, main_file=main)


def inspect_gz(handle: BinaryIO, entry: str) -> Entry:
    """arXiv's .gz is either a gzipped tar or a single gzipped .tex file."""
    inflated = _gunzip_small(handle)
    as_tar = inspect_tar(handle, entry, "gz", inflated=inflated)
    if as_tar is not None:
        return as_tar
    name = document_name(entry)
    if inflated is not None:
        head = inflated[:HEAD_BYTES]
    else:
        try:
            handle.seek(0)
            with gzip.GzipFile(fileobj=handle, mode="rb") as single:
                head = single.read(HEAD_BYTES)
        except (*MALFORMED_ARCHIVE, OSError) as exc:
            return Entry(name, entry, "gz", problem="archive", detail=f"unreadable gzip: {_reason(exc)}")
    if b"\x00" in head:
        return Entry(name, entry, "gz", problem="binary", detail="the gzipped file is binary, not TeX")
    return Entry(name, entry, "gz", main_file=f"{name}.tex")


def inspect_entry(path: Path, entry: str, roots: Sequence[Path] | None = None) -> Entry:
    """Describe one entry of a corpus directory, read through `source_open` (confined to `roots`, by default
    the directory holding it). Never raises for a bad entry: it becomes an Entry with a problem."""
    lowered = entry.lower()
    short = document_name(entry)
    try:
        fd = source_open(path, roots)
    except SourceRefused as exc:
        kind = "link" if exc.what == "unsafe_path" else "other"
        return Entry(short, entry, kind, problem=exc.what, detail=str(exc))
    except FileNotFoundError:
        why = "dangling link" if path.is_symlink() else "the entry is gone"
        return Entry(short, entry, "unknown", problem="unreadable", detail=why)
    except OSError as exc:
        return Entry(short, entry, "unknown", problem="unreadable", detail=str(exc.strerror or exc))
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            return inspect_directory(fd, path, entry)
        if not lowered.endswith((".tex", *ARCHIVE_SUFFIXES)):
            return Entry(short, entry, "other", problem="unsupported", detail="not a directory, .tex or archive")
        with os.fdopen(os.dup(fd), "rb") as handle:
            if lowered.endswith(".tex"):
                if b"\x00" in handle.read(HEAD_BYTES):
                    return Entry(short, entry, "tex", problem="binary", detail="the file is binary, not TeX")
                return Entry(short, entry, "tex", main_file=_file_name(entry))
            if lowered.endswith(".zip"):
                return inspect_zip(handle, entry)
            if lowered.endswith((".tar.gz", ".tgz")):
                return inspect_tar(handle, entry, "tar.gz", inflated=_gunzip_small(handle)) or Entry(
                    short, entry, "tar.gz", problem="archive", detail="not a gzipped tar archive"
                )
            return inspect_gz(handle, entry)
    except SourceRefused as exc:
        return Entry(short, entry, "unknown", problem=exc.what, detail=str(exc))
    except OSError as exc:
        return Entry(short, entry, "unknown", problem="unreadable", detail=str(exc.strerror or exc))
    finally:
        os.close(fd)


# --- payloads: a document packed as a ZIP for a worker ---------------------------------------------

PAYLOAD_MAX_BYTES = 512 * 1024 * 1024


def pack_entry(
    path: Path, kind: str, entry: str, *, roots: Sequence[Path] | None = None, max_bytes: int | None = None
) -> bytes:
    """The document at `path` as ZIP bytes, as workers expect it: a directory's files, a lone .tex, a
    .zip as it is, a tar or gzipped .tex repacked. Read through `source_open` (confined to `roots`) and
    streamed: each member is compressed as it is read, and reading stops once the document passes
    `max_bytes` (default PAYLOAD_MAX_BYTES) unpacked. Unsafe archive members and links out of a directory
    entry are left out. Raises SourceRefused for an entry that must not be packed (unsafe_path, too_large,
    archive, unsupported), OSError when it cannot be read now, ValueError for an unknown kind."""
    limit = PAYLOAD_MAX_BYTES if max_bytes is None else max_bytes
    if kind not in ("zip", "tex", "dir", "tar.gz", "gz"):
        raise ValueError(f"cannot pack an entry of kind {kind!r}")
    fd = source_open(path, roots)
    try:
        status = os.fstat(fd)
        if kind == "dir":
            if not stat.S_ISDIR(status.st_mode):
                raise SourceRefused("unsupported", f"{entry} is no longer a directory")
            return _zip_limited(_directory_members(fd, path), limit)
        if not stat.S_ISREG(status.st_mode):
            raise SourceRefused("unsupported", f"{entry} is no longer a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            if kind == "zip":
                if status.st_size > limit:
                    raise SourceRefused("too_large", f"the document is larger than {limit} bytes")
                return handle.read(limit + 1)
            if kind == "tex":
                # Chunks no bigger than the limit: a small limit reads little more than itself.
                member = _file_name(entry)
                return _zip_limited([(member, _chunks(handle, min(_CHUNK, limit + 1)), status.st_mtime)], limit)
            try:
                return _zip_limited(_gzip_members(handle, document_name(entry), status.st_mtime), limit)
            except SourceRefused:
                raise
            except (*MALFORMED_ARCHIVE, OSError) as exc:
                raise SourceRefused("archive", f"unreadable archive: {_reason(exc)}") from exc
    finally:
        os.close(fd)


def _zip_limited(members: Iterable[tuple[str, Iterable[bytes], float]], limit: int) -> bytes:
    try:
        return zip_stream(members, max_bytes=limit)
    except ZipTooLarge as exc:
        raise SourceRefused("too_large", f"the document is larger than {limit} bytes unpacked ({exc})") from exc


class Readable(Protocol):
    """What _chunks reads from: a file, a gzip stream or an archive's member."""

    def read(self, size: int, /) -> bytes: ...


def _chunks(handle: Readable, size: int = _CHUNK) -> Iterator[bytes]:
    while chunk := handle.read(size):
        yield chunk


def _directory_members(fd: int, path: Path) -> Iterator[tuple[str, Iterator[bytes], float]]:
    entry_real = _entry_real(fd, path)
    for relative in _directory_files(entry_real):
        try:
            member = _open_inside(fd, entry_real, relative)
        except (SourceRefused, OSError):
            continue  # a link out of the entry, a FIFO, a file gone since the listing: left out
        with os.fdopen(member, "rb") as handle:
            yield relative, _chunks(handle), os.fstat(handle.fileno()).st_mtime


def _gzip_members(handle: BinaryIO, name: str, mtime: float) -> Iterator[tuple[str, Iterator[bytes], float]]:
    archive = _tar_open(handle)
    if archive is None:
        handle.seek(0)
        with gzip.GzipFile(fileobj=handle, mode="rb") as single:
            yield f"{name}.tex", _chunks(single), mtime
        return
    with archive:
        for member in archive:
            if member.isfile() and member_name_safe(member.name):
                extracted = archive.extractfile(member)
                if extracted is not None:
                    yield member.name, _chunks(extracted), member.mtime
