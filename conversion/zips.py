"""ZIP archives built and read by hand for the dispatcher's hot path. Pure library (standard library only).

The dispatcher packs every document it hands out and opens every result that comes back; `zipfile`
spends most of its time on bookkeeping those one- or two-member archives do not need (ZipInfo objects,
file objects, a seekable buffer). `zip_build` writes a plain archive (no ZIP64, no encryption) that
every ZIP reader accepts, and `zip_stream` the same from members read in chunks, under a size limit;
`zip_member` reads one member out of an archive in memory, and hands anything it does not read itself
(ZIP64, several disks, prepended data, other compression methods) to `zipfile`, so it accepts what
`zipfile` accepts. It returns a member's content only once its size and CRC-32 check out, and raises
only `KeyError` for a missing member and `zipfile.BadZipFile` for anything else (a damaged archive, an
encrypted member, a compression method `zipfile` cannot read either).

`member_name_problem` is the one check of a member's name that every reader of an archive applies (the
import's inspection, the worker's unpacking, the result file view and the dataset export).
"""

from __future__ import annotations

import io
import re
import struct
import time
import zipfile
import zlib
from collections.abc import Iterable

_LOCAL = struct.Struct("<4s5H3L2H")  # signature, version, flags, method, time, date, crc, sizes, name/extra lengths
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_END_SIGNATURE = b"PK\x05\x06"
_VERSION = 20  # 2.0: deflate
_MADE_BY_UNIX = (3 << 8) | _VERSION
_UTF8_NAME = 0x800
_ENCRYPTED = 0x1
_STORED, _DEFLATED = 0, 8
_MAX_MEMBERS = 0xFFFF
_MAX_32 = 0xFFFFFFFF
_REGULAR_FILE = 0o100644 << 16


_DRIVE = re.compile(r"[A-Za-z]:")
# The names member_name_problem lets pass, as one pattern for the hot paths (the export asks of every member
# of every result archive): no drive letter first; segments of anything but '/', '\\' and NUL, none of them '..'.
_SAFE = r"(?![A-Za-z]:)(?:(?!\.\.(?:/|\Z))[^/\\\x00]+/)*(?!\.\.\Z)[^/\\\x00]+"
_SAFE_TEXT = re.compile(_SAFE)
_SAFE_BYTES = re.compile(_SAFE.encode())


def member_name_problem(name: str, *, directory: bool = False) -> str | None:
    """Why a member name could leave the directory it is unpacked or served under, or None when it stays
    inside. Refused: an empty name, a NUL, a backslash (another separator on some systems), an absolute
    path, a drive letter (`C:`), a `..` segment and an empty segment (`a//b`). `.` segments (`./main.tex`,
    common in arXiv tarballs) stay inside and pass. A directory entry may end with one `/`."""
    if directory and name.endswith("/"):
        name = name[:-1]
    if not name:
        return "an empty name"
    if "\x00" in name:
        return "a NUL character"
    if "\\" in name:
        return "a backslash"
    if name.startswith("/"):
        return "an absolute path"
    if _DRIVE.match(name):
        return "a drive letter"
    segments = name.split("/")
    if ".." in segments:
        return "a '..' segment"
    if "" in segments:
        return "an empty segment"
    return None


def member_name_safe(name: str | bytes, *, directory: bool = False) -> bool:
    """Whether member_name_problem(name) is None, in one match; `name` may also be the raw bytes of a ZIP
    header, as the export reads them."""
    slash, pattern = (b"/", _SAFE_BYTES) if isinstance(name, bytes) else ("/", _SAFE_TEXT)
    if directory and name.endswith(slash):
        name = name[:-1]
    return pattern.fullmatch(name) is not None


def dos_time(mtime: float) -> tuple[int, int]:
    """(time, date) fields of a modification time, clamped to the years a ZIP can carry (1980-2107)."""
    year, month, day, hour, minute, second = time.localtime(mtime)[:6]
    if year < 1980:
        year, month, day, hour, minute, second = 1980, 1, 1, 0, 0, 0
    elif year > 2107:
        year, month, day, hour, minute, second = 2107, 12, 31, 23, 59, 58
    return (hour << 11) | (minute << 5) | (second // 2), ((year - 1980) << 9) | (month << 5) | day


def zip_build(members: Iterable[tuple[str, bytes, float]], *, level: int = 1) -> bytes:
    """A ZIP of (name, content, modification time) members, each deflated at `level`. Beyond what a plain
    archive can hold (65,535 members, 4 GiB) it is written by `zipfile` with ZIP64 records instead."""
    parts: list[bytes] = []
    central: list[bytes] = []
    offset = 0
    members = list(members)
    if len(members) >= _MAX_MEMBERS:
        return _zip_build_zipfile(members, level)
    for name, content, mtime in members:
        encoded = name.encode("utf-8")
        flags = 0 if encoded.isascii() else _UTF8_NAME
        compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        packed = compressor.compress(content) + compressor.flush()
        crc = zlib.crc32(content)
        if len(content) > _MAX_32 or len(packed) > _MAX_32 or offset > _MAX_32:
            return _zip_build_zipfile(members, level)
        clock, date = dos_time(mtime)
        fields = (_VERSION, flags, _DEFLATED, clock, date, crc, len(packed), len(content), len(encoded))
        parts += (_LOCAL.pack(_LOCAL_SIGNATURE, *fields, 0), encoded, packed)
        record = _CENTRAL.pack(_CENTRAL_SIGNATURE, _MADE_BY_UNIX, *fields, 0, 0, 0, 0, _REGULAR_FILE, offset)
        central += (record, encoded)
        offset += _LOCAL.size + len(encoded) + len(packed)
    directory = b"".join(central)
    if offset > _MAX_32:
        return _zip_build_zipfile(members, level)
    end = _END.pack(_END_SIGNATURE, 0, 0, len(members), len(members), len(directory), offset, 0)
    return b"".join((*parts, directory, end))


class ZipTooLarge(ValueError):
    """The members passed the size limit of `zip_stream` while they were read."""


def zip_stream(members: Iterable[tuple[str, Iterable[bytes], float]], *, max_bytes: int, level: int = 1) -> bytes:
    """A ZIP like `zip_build`'s, of (name, chunks of content, modification time) members, each compressed
    chunk by chunk as it is read, so memory holds the compressed archive and one chunk, never a whole
    member. Raises ZipTooLarge as soon as the contents read pass `max_bytes` (kept below 4 GiB, so the
    archive stays plain), or when there are more members than a plain archive holds."""
    if max_bytes >= _MAX_32:
        raise ValueError("zip_stream writes plain archives: max_bytes must stay below 4 GiB")
    parts: list[bytes] = []
    central: list[bytes] = []
    offset = total = count = 0
    for name, chunks, mtime in members:
        count += 1
        if count >= _MAX_MEMBERS:
            raise ZipTooLarge(f"more than {_MAX_MEMBERS - 1} files")
        encoded = name.encode("utf-8")
        flags = 0 if encoded.isascii() else _UTF8_NAME
        compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        packed: list[bytes] = []
        crc = size = packed_size = 0
        for chunk in chunks:
            size += len(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise ZipTooLarge(f"read {total} bytes by {name}")
            crc = zlib.crc32(chunk, crc)
            piece = compressor.compress(chunk)
            if piece:
                packed.append(piece)
                packed_size += len(piece)
        piece = compressor.flush()
        packed.append(piece)
        packed_size += len(piece)
        clock, date = dos_time(mtime)
        fields = (_VERSION, flags, _DEFLATED, clock, date, crc, packed_size, size, len(encoded))
        parts += (_LOCAL.pack(_LOCAL_SIGNATURE, *fields, 0), encoded, *packed)
        record = _CENTRAL.pack(_CENTRAL_SIGNATURE, _MADE_BY_UNIX, *fields, 0, 0, 0, 0, _REGULAR_FILE, offset)
        central += (record, encoded)
        offset += _LOCAL.size + len(encoded) + packed_size
        if offset >= _MAX_32:  # deflate can grow incompressible data a little beyond max_bytes
            raise ZipTooLarge(f"the archive passes {_MAX_32} bytes")
    directory = b"".join(central)
    end = _END.pack(_END_SIGNATURE, 0, 0, count, count, len(directory), offset, 0)
    return b"".join((*parts, directory, end))


def _zip_build_zipfile(members: list[tuple[str, bytes, float]], level: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        for name, content, mtime in members:
            info = zipfile.ZipInfo(name, date_time=_zipinfo_time(mtime))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = _REGULAR_FILE
            archive.writestr(info, content)
    return buffer.getvalue()


def _zipinfo_time(mtime: float) -> tuple[int, int, int, int, int, int]:
    clock, date = dos_time(mtime)
    return (date >> 9) + 1980, (date >> 5) & 0xF, date & 0x1F, clock >> 11, (clock >> 5) & 0x3F, (clock & 0x1F) * 2


def zip_member(data: bytes, name: str) -> bytes:
    """The content of member `name` of the ZIP `data` (the last one of that name, as `zipfile` does)."""
    content = _zip_member_plain(data, name)
    return _zip_member_zipfile(data, name) if content is None else content


def _zip_member_plain(data: bytes, name: str) -> bytes | None:
    """The member of a plain, undamaged archive, checked by size and CRC-32; KeyError when the whole
    directory was read and has no such member; None for anything else, which zipfile then decides (ZIP64,
    data before the archive, another method, an encrypted or damaged member): zipfile is more lenient
    with some damage (it reads a member whose sizes are wrong but whose CRC-32 checks out)."""
    end_at = len(data) - _END.size
    if end_at < 0 or data[end_at : end_at + 4] != _END_SIGNATURE:
        return None  # a comment after the end record, or not a ZIP
    _, disk, directory_disk, _, count, size, start, _ = _END.unpack_from(data, end_at)
    if disk or directory_disk or count == _MAX_MEMBERS or start + size != end_at:
        return None
    found = None
    position = start
    for _ in range(count):
        if position + _CENTRAL.size > end_at:
            return None
        header = _CENTRAL.unpack_from(data, position)
        if header[0] != _CENTRAL_SIGNATURE:
            return None
        name_length, extra_length, comment_length = header[10:13]
        name_at = position + _CENTRAL.size
        raw_name = data[name_at : name_at + name_length]
        try:
            member_name = raw_name.decode("utf-8" if header[3] & _UTF8_NAME else "cp437")
        except UnicodeDecodeError:
            return None
        if member_name == name:
            found = header, raw_name
        position = name_at + name_length + extra_length + comment_length
    if position != end_at:
        return None
    if found is None:
        raise KeyError(f"There is no item named {name!r} in the archive")
    header, raw_name = found
    flags, method, crc, packed_size, size, offset = header[3], header[4], header[7], header[8], header[9], header[16]
    if flags & _ENCRYPTED or method not in (_STORED, _DEFLATED) or offset + _LOCAL.size > start:
        return None
    local = _LOCAL.unpack_from(data, offset)
    name_at = offset + _LOCAL.size
    if local[0] != _LOCAL_SIGNATURE or data[name_at : name_at + local[9]] != raw_name:
        return None
    begin = name_at + local[9] + local[10]
    packed = data[begin : begin + packed_size]
    if len(packed) != packed_size or begin + packed_size > start:
        return None
    if method == _STORED:
        content = packed
    else:
        decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            content = decompressor.decompress(packed, size + 1)
        except zlib.error:
            return None
    if len(content) != size or zlib.crc32(content) != crc:
        return None
    return content


def _zip_member_zipfile(data: bytes, name: str) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return archive.read(name)
    except (KeyError, zipfile.BadZipFile):
        raise
    # What else zipfile raises for a damaged or unreadable archive: a password wanted (RuntimeError), an
    # unknown method (NotImplementedError), short data (EOFError, struct.error), bad fields (ValueError),
    # a damaged deflate stream (zlib.error).
    except (RuntimeError, NotImplementedError, EOFError, ValueError, OSError, struct.error, zlib.error) as exc:
        raise zipfile.BadZipFile(f"{type(exc).__name__}: {exc}") from exc
