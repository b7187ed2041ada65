"""The project's one ZIP record layer, written by hand where `zipfile` is too slow. Pure library (standard
library only): the worker, the dispatcher, the result file view and the dataset export all use it.

The dispatcher packs every document it hands out and opens every result that comes back; `zipfile`
spends most of its time on bookkeeping those one- or two-member archives do not need (ZipInfo objects,
file objects, a seekable buffer). `zip_build` writes a plain archive (no ZIP64, no encryption) that
every ZIP reader accepts, and `zip_stream` the same from members read in chunks, under a size limit;
`zip_member` reads one member out of an archive in memory, and hands anything it does not read itself
(ZIP64, several disks, prepended data, other compression methods) to `zipfile`, so it accepts what
`zipfile` accepts. It returns a member's content only once its size and CRC-32 check out, and raises
only `KeyError` for a missing member and `zipfile.BadZipFile` for anything else (a damaged archive, an
encrypted member, a compression method `zipfile` cannot read either).

The dataset export copies result archives into large ones without inflating or deflating anything:
`ZipOut` writes an archive from members' compressed bytes (a zip64 offset and zip64 end records past
`zipfile`'s limits, as `zipfile` writes them), and `zip_copy` copies the members of an archive into it.
`zip_member` and `zip_copy` read a plain archive's records with one parser (`_members_parse`) and leave
the rest to `zipfile`.

`member_name_problem` is the one check of a member's name that every reader of an archive applies (the
import's inspection, the worker's unpacking, the result file view and the dataset export);
`member_name_safe` answers the same in one match.
"""

from __future__ import annotations

import io
import os
import re
import struct
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

_LOCAL = struct.Struct("<4s5H3L2H")  # signature, version, flags, method, time, date, crc, sizes, name/extra lengths
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")  # signature, record size, versions, disks, member counts, size, offset
_END64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_OFFSET = struct.Struct("<HHQ")  # a zip64 extra field holding a local header's offset
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_END_SIGNATURE = b"PK\x05\x06"
_END64_SIGNATURE = b"PK\x06\x06"
_END64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_VERSION = 20  # 2.0: deflate
_MADE_BY_UNIX = (3 << 8) | _VERSION
_UTF8_NAME = 0x800
_ENCRYPTED = 0x1
_KEPT_FLAGS = 0x6  # the deflate option bits a copied member keeps; no data descriptor, no encryption
_STORED, _DEFLATED = 0, 8
_MAX_MEMBERS = 0xFFFF
_MAX_32 = 0xFFFFFFFF
_REGULAR_FILE = 0o100644 << 16
_CHUNK = 1024 * 1024  # read and write buffers of ZipOut and zip_copy


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
    if isinstance(name, bytes):
        return _SAFE_BYTES.fullmatch(name.removesuffix(b"/") if directory else name) is not None
    return _SAFE_TEXT.fullmatch(name.removesuffix("/") if directory else name) is not None


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
    parsed = _members_parse(data)
    if parsed is None:
        return None
    directory_start, members = parsed
    found = None
    for raw_name, header in members:
        try:
            member_name = raw_name.decode("utf-8" if header[3] & _UTF8_NAME else "cp437")
        except UnicodeDecodeError:
            return None
        if member_name == name:
            found = raw_name, header
    if found is None:
        raise KeyError(f"There is no item named {name!r} in the archive")
    raw_name, header = found
    flags, method, crc, packed_size, size = header[3], header[4], header[7], header[8], header[9]
    if flags & _ENCRYPTED or method not in (_STORED, _DEFLATED):
        return None
    begin = _member_start(data, raw_name, header, directory_start)
    if begin is None:
        return None
    packed = data[begin : begin + packed_size]
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


def _members_parse(data: bytes) -> tuple[int, list[tuple[bytes, tuple[int, ...]]]] | None:
    """Where the central directory of a plain, undamaged archive held in memory starts, and the raw name and
    central directory header of each of its members, in directory order; None when the archive is not one
    (ZIP64, several disks, data before it or a comment after it, a damaged directory), which zipfile then
    reads. The members' local headers are checked by _member_start, for the members a caller reads."""
    end_at = len(data) - _END.size
    if end_at < 0 or data[end_at : end_at + 4] != _END_SIGNATURE:
        return None  # a comment after the end record, or not a ZIP
    _, disk, directory_disk, disk_count, count, size, start, _ = _END.unpack_from(data, end_at)
    if disk or directory_disk or disk_count != count or count == _MAX_MEMBERS or start + size != end_at:
        return None
    members = []
    position = start
    for _ in range(count):
        if position + _CENTRAL.size > end_at:
            return None
        header = _CENTRAL.unpack_from(data, position)
        if header[0] != _CENTRAL_SIGNATURE:
            return None
        name_at = position + _CENTRAL.size
        name_end = name_at + header[10]
        members.append((data[name_at:name_end], header))
        position = name_end + header[11] + header[12]
    if position != end_at:
        return None
    return start, members


def _member_start(data: bytes, raw_name: bytes, header: tuple[int, ...], directory_start: int) -> int | None:
    """Where the compressed bytes of a member (its raw name and central directory header, from
    _members_parse) start, once its local header checks out (signature, the same name) and those bytes
    end before the central directory; None otherwise. Sizes and offsets that say "in a zip64 field" are
    refused."""
    offset, packed_size = header[16], header[8]
    if _MAX_32 in (packed_size, header[9], offset) or offset + _LOCAL.size > directory_start:
        return None
    local = _LOCAL.unpack_from(data, offset)
    name_at = offset + _LOCAL.size
    if local[0] != _LOCAL_SIGNATURE or data[name_at : name_at + local[9]] != raw_name:
        return None
    begin: int = name_at + local[9] + local[10]
    if begin + packed_size > directory_start:
        return None
    return begin


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


class ZipOut:
    """A ZIP archive written to a file from members' compressed bytes, as zipfile writes one (a zip64 offset
    field and zip64 end records past its limits), without zipfile's per-member objects: each member's central
    directory entry is packed when the member is written and kept as bytes until the end."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "wb", buffering=_CHUNK)  # noqa: SIM115  (closed in close)
        self.offset = 0
        self.central: list[bytes] = []

    def mark(self) -> tuple[int, int]:
        return len(self.central), self.offset

    def rollback(self, mark: tuple[int, int]) -> None:
        """Cut the archive back to `mark` (a document whose result broke midway)."""
        members, self.offset = mark
        del self.central[members:]
        self.file.seek(self.offset)
        self.file.truncate()

    def member(self, name: bytes, utf8: bool, source: tuple[int, ...], chunks: Iterable[Any]) -> None:
        """Write one member: `source` is (flags, method, time, date, CRC, compressed size, size, system,
        external attributes) as the source's central directory holds them; `chunks` its compressed bytes."""
        flags, method, clock, date, crc, compressed, size, system, external = source
        if compressed >= _MAX_32 or size >= _MAX_32:
            raise zipfile.BadZipFile("a member of 4 GiB or more")
        flags = (flags & _KEPT_FLAGS) | (_UTF8_NAME if utf8 else 0)
        local = _LOCAL.pack(_LOCAL_SIGNATURE, _VERSION, flags, method, clock, date, crc, compressed, size, len(name), 0)
        write = self.file.write
        write(local)
        write(name)
        written = 0
        for chunk in chunks:
            write(chunk)
            written += len(chunk)
        if written != compressed:
            raise zipfile.BadZipFile("a member is shorter than its header says")
        offset, extra, version = self.offset, b"", _VERSION
        if offset > zipfile.ZIP64_LIMIT:
            offset, extra, version = _MAX_32, _ZIP64_OFFSET.pack(1, 8, offset), zipfile.ZIP64_VERSION
        self.central.append(
            _CENTRAL.pack(_CENTRAL_SIGNATURE, system << 8 | version, version, flags, method, clock, date, crc,
                          compressed, size, len(name), len(extra), 0, 0, 0, external, offset)
            + name + extra
        )  # fmt: skip
        self.offset += _LOCAL.size + len(name) + compressed

    def close(self) -> None:
        start, count = self.offset, len(self.central)
        size = 0
        for entry in self.central:
            self.file.write(entry)
            size += len(entry)
        if count > zipfile.ZIP_FILECOUNT_LIMIT or start > zipfile.ZIP64_LIMIT or size > zipfile.ZIP64_LIMIT:
            self.file.write(_END64.pack(_END64_SIGNATURE, 44, 45, 45, 0, 0, count, count, size, start))
            self.file.write(_END64_LOCATOR.pack(_END64_LOCATOR_SIGNATURE, 0, start + size, 1))
            count, size, start = min(count, _MAX_MEMBERS), min(size, _MAX_32), min(start, _MAX_32)
        self.file.write(_END.pack(_END_SIGNATURE, 0, 0, count, count, size, start, 0))
        self.file.close()
        self.central = []


def zip_copy(source: str | bytes, target: ZipOut, prefix: str) -> None:
    """Copy the members of a ZIP (a file's path, or a whole archive in memory) into `target` under `prefix`,
    their compressed bytes unchanged. Directory entries, encrypted members and members whose names
    member_name_safe refuses are left out. An archive in memory that the plain reader takes (every member
    stored or deflated, no zip64, no comment) is copied from its records at once; anything else is read by
    zipfile, and a member of another compression method is inflated and deflated again."""
    if not isinstance(source, bytes) or (members := _members_copied(source)) is None:
        _zip_copy_zipfile(io.BytesIO(source) if isinstance(source, bytes) else source, target, prefix)
        return
    encoded_prefix = prefix.encode("utf-8")
    prefix_utf8 = not prefix.isascii()
    view = memoryview(source)
    for raw_name, fields, start in members:
        utf8 = bool(fields[0] & _UTF8_NAME)
        if not utf8 and not raw_name.isascii():
            raw_name, utf8 = raw_name.decode("cp437").encode("utf-8"), True
        if raw_name.endswith(b"/") or fields[0] & _ENCRYPTED or not member_name_safe(raw_name):
            continue
        target.member(encoded_prefix + raw_name, utf8 or prefix_utf8, fields, (view[start : start + fields[5]],))


def _members_copied(data: bytes) -> list[tuple[bytes, tuple[int, ...], int]] | None:
    """(raw name, (flags, method, time, date, CRC, compressed size, size, system, external attributes),
    data start) of each member of a plain archive in memory whose members are all stored or deflated and
    whose local headers check out; None otherwise."""
    parsed = _members_parse(data)
    if parsed is None:
        return None
    directory_start, members = parsed
    copied: list[tuple[bytes, tuple[int, ...], int]] = []
    for raw_name, header in members:
        method = header[4]
        start = _member_start(data, raw_name, header, directory_start)
        if method not in (_STORED, _DEFLATED) or start is None:
            return None
        fields = (header[3], method, header[5], header[6], header[7], header[8], header[9], header[1] >> 8, header[15])
        copied.append((raw_name, fields, start))
    return copied


def _zip_copy_zipfile(source: str | BinaryIO, target: ZipOut, prefix: str) -> None:
    """The members of an archive zipfile reads: compressed bytes copied in chunks; a member compressed
    otherwise than stored or deflated is inflated and deflated again (through a temporary file)."""
    with zipfile.ZipFile(source) as archive:
        fp: BinaryIO = archive.fp  # type: ignore[assignment]
        for info in archive.infolist():
            raw_name = info.filename.encode("utf-8")
            if info.is_dir() or info.flag_bits & _ENCRYPTED or not member_name_safe(raw_name):
                continue
            clock = info.date_time[3] << 11 | info.date_time[4] << 5 | info.date_time[5] // 2
            date = (info.date_time[0] - 1980) << 9 | info.date_time[1] << 5 | info.date_time[2]
            name = prefix.encode("utf-8") + raw_name
            utf8 = not name.isascii()
            if info.compress_type in (_STORED, _DEFLATED):
                fp.seek(info.header_offset)
                header = _LOCAL.unpack(fp.read(_LOCAL.size))
                if header[0] != _LOCAL_SIGNATURE:
                    raise zipfile.BadZipFile(f"bad local header of {info.filename}")
                fp.seek(info.header_offset + _LOCAL.size + header[9] + header[10])
                fields = (info.flag_bits, info.compress_type, clock, date, info.CRC, info.compress_size,
                          info.file_size, info.create_system, info.external_attr)  # fmt: skip
                target.member(name, utf8, fields, _chunks(fp, info.compress_size))
                continue
            with tempfile.TemporaryFile(dir=os.path.dirname(target.file.name)) as spool:
                crc, size, deflate = 0, 0, zlib.compressobj(6, zlib.DEFLATED, -15)
                with archive.open(info) as reader:
                    while chunk := reader.read(_CHUNK):
                        crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                        spool.write(deflate.compress(chunk))
                spool.write(deflate.flush())
                compressed = spool.tell()
                spool.seek(0)
                fields = (0, _DEFLATED, clock, date, crc, compressed, size, info.create_system,
                          info.external_attr)  # fmt: skip
                target.member(name, utf8, fields, _chunks(spool, compressed))


def _chunks(stream: BinaryIO, length: int) -> Iterator[bytes]:
    while length > 0:
        chunk = stream.read(min(_CHUNK, length))
        if not chunk:
            return
        length -= len(chunk)
        yield chunk
