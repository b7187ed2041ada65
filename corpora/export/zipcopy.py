"""The ZIP side of dataset export: copy the members of result archives into an export archive with their
compressed bytes unchanged, and write that archive (local headers, central directory, zip64 end records
past zipfile's limits) without a zipfile object per member."""

from __future__ import annotations

import os
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from conversion.zips import member_name_safe

_CHUNK = 1024 * 1024  # read and write buffers

_END = struct.Struct(zipfile.structEndArchive)
_END64 = struct.Struct(zipfile.structEndArchive64)
_END64_LOCATOR = struct.Struct(zipfile.structEndArchive64Locator)
_CENTRAL = struct.Struct(zipfile.structCentralDir)
_LOCAL = struct.Struct(zipfile.structFileHeader)
_OFFSET64 = struct.Struct("<HHQ")
_UTF8 = 0x800
_KEPT_FLAGS = 0x6  # the deflate option bits; no data descriptor (sizes are in the local header), no encryption
_SIZE_LIMIT = 0xFFFFFFFF  # members this large would need zip64 sizes: results never are; refused


class ZipOut:
    """A ZIP archive written from members' compressed bytes, as zipfile writes one (zip64 end records
    past its limits), without zipfile's per-member objects: each member's central directory entry is
    packed when the member is written and kept as bytes until the end."""

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
        flags, method, dos_time, dos_date, crc, compressed, size, system, external = source
        if compressed >= _SIZE_LIMIT or size >= _SIZE_LIMIT:
            raise zipfile.BadZipFile("a member of 4 GiB or more")
        flags = (flags & _KEPT_FLAGS) | (_UTF8 if utf8 else 0)
        local = _LOCAL.pack(zipfile.stringFileHeader, 20, 0, flags, method, dos_time, dos_date, crc, compressed,
                            size, len(name), 0)  # fmt: skip
        write = self.file.write
        write(local)
        write(name)
        written = 0
        for chunk in chunks:
            write(chunk)
            written += len(chunk)
        if written != compressed:
            raise zipfile.BadZipFile("a member is shorter than its header says")
        offset, extra, version = self.offset, b"", 20
        if offset > zipfile.ZIP64_LIMIT:
            offset, extra, version = 0xFFFFFFFF, _OFFSET64.pack(1, 8, offset), zipfile.ZIP64_VERSION
        self.central.append(
            _CENTRAL.pack(zipfile.stringCentralDir, version, system, version, 0, flags, method, dos_time, dos_date,
                          crc, compressed, size, len(name), len(extra), 0, 0, 0, external, offset)
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
            self.file.write(_END64.pack(zipfile.stringEndArchive64, 44, 45, 45, 0, 0, count, count, size, start))
            self.file.write(_END64_LOCATOR.pack(zipfile.stringEndArchive64Locator, 0, start + size, 1))
            count, size, start = min(count, 0xFFFF), min(size, 0xFFFFFFFF), min(start, 0xFFFFFFFF)
        self.file.write(_END.pack(zipfile.stringEndArchive, 0, 0, count, count, size, start, 0))
        self.file.close()
        self.central = []


# Result archives up to this size are read whole and parsed here (one read instead of a dozen seeks
# and reads through zipfile, which is most of the cost of small results); larger ones go through zipfile.
_SMALL_RESULT = 4 * 1024 * 1024


def result_copy(source: str, target: ZipOut, prefix: str) -> None:
    """Copy the members of one result archive into `target` under `prefix`, compressed bytes unchanged."""
    with open(source, "rb", buffering=0) as stream:
        data = stream.read() if os.fstat(stream.fileno()).st_size <= _SMALL_RESULT else None
    members = _members_parse(data) if data is not None else None
    if members is None:  # large, zip64, with a comment, or anything unusual: zipfile reads it
        _result_copy_zipfile(source, target, prefix)
        return
    encoded_prefix = prefix.encode("utf-8")
    prefix_utf8 = not prefix.isascii()
    view = memoryview(data)  # type: ignore[arg-type]
    for raw_name, fields, start in members:
        utf8 = bool(fields[0] & _UTF8)
        if not utf8 and not raw_name.isascii():
            raw_name, utf8 = raw_name.decode("cp437").encode("utf-8"), True
        if raw_name.endswith(b"/") or fields[0] & 0x1 or not member_name_safe(raw_name):
            continue
        target.member(encoded_prefix + raw_name, utf8 or prefix_utf8, fields, (view[start : start + fields[5]],))


def _members_parse(data: bytes) -> list[tuple[bytes, tuple[int, ...], int]] | None:
    """(raw name, (flags, method, time, date, CRC, compressed size, size, system, external attributes),
    data start) of each member of a small, plain ZIP held in memory; None when it is not one."""
    if len(data) < _END.size or data[-_END.size : -_END.size + 4] != zipfile.stringEndArchive:
        return None
    _sig, disk, disk_dir, count_disk, count, dir_size, dir_offset, _comment = _END.unpack_from(
        data, len(data) - _END.size
    )
    if disk or disk_dir or count != count_disk or dir_offset + dir_size > len(data) - _END.size:
        return None
    members, position = [], dir_offset
    for _ in range(count):
        fields = _CENTRAL.unpack_from(data, position)
        if fields[0] != zipfile.stringCentralDir:
            return None
        method, compressed, size, offset = fields[6], fields[10], fields[11], fields[18]
        name_end = position + _CENTRAL.size + fields[12]
        raw_name = data[position + _CENTRAL.size : name_end]
        position = name_end + fields[13] + fields[14]
        if method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or 0xFFFFFFFF in (compressed, size, offset):
            return None
        if data[offset : offset + 4] != zipfile.stringFileHeader:
            return None
        name_length, extra_length = struct.unpack_from("<HH", data, offset + 26)
        start = offset + 30 + name_length + extra_length
        if start + compressed > len(data):
            return None
        source = (fields[5], method, fields[7], fields[8], fields[9], compressed, size, fields[2], fields[17])
        members.append((raw_name, source, start))
    return members


def _result_copy_zipfile(source: str, target: ZipOut, prefix: str) -> None:
    """The members of a result archive zipfile reads: compressed bytes copied in chunks; a member
    compressed otherwise than stored or deflated is inflated and deflated again (through a temporary file)."""
    with zipfile.ZipFile(source) as result:
        fp: BinaryIO = result.fp  # type: ignore[assignment]
        for info in result.infolist():
            raw_name = info.filename.encode("utf-8")
            if info.is_dir() or info.flag_bits & 0x1 or not member_name_safe(raw_name):
                continue
            dos_time = info.date_time[3] << 11 | info.date_time[4] << 5 | info.date_time[5] // 2
            dos_date = (info.date_time[0] - 1980) << 9 | info.date_time[1] << 5 | info.date_time[2]
            name = prefix.encode("utf-8") + raw_name
            utf8 = not name.isascii()
            if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                fp.seek(info.header_offset)
                header = _LOCAL.unpack(fp.read(_LOCAL.size))
                if header[0] != zipfile.stringFileHeader:
                    raise zipfile.BadZipFile(f"bad local header of {info.filename}")
                fp.seek(info.header_offset + _LOCAL.size + header[10] + header[11])
                fields = (info.flag_bits, info.compress_type, dos_time, dos_date, info.CRC, info.compress_size,
                          info.file_size, info.create_system, info.external_attr)  # fmt: skip
                target.member(name, utf8, fields, _chunks(fp, info.compress_size))
                continue
            with tempfile.TemporaryFile(dir=os.path.dirname(target.file.name)) as spool:
                crc, size, deflate = 0, 0, zlib.compressobj(6, zlib.DEFLATED, -15)
                with result.open(info) as reader:
                    while chunk := reader.read(_CHUNK):
                        crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                        spool.write(deflate.compress(chunk))
                spool.write(deflate.flush())
                compressed = spool.tell()
                spool.seek(0)
                fields = (0, zipfile.ZIP_DEFLATED, dos_time, dos_date, crc, compressed, size, info.create_system,
                          info.external_attr)  # fmt: skip
                target.member(name, utf8, fields, _chunks(spool, compressed))


def _chunks(stream: BinaryIO, length: int) -> Iterator[bytes]:
    while length > 0:
        chunk = stream.read(min(_CHUNK, length))
        if not chunk:
            return
        length -= len(chunk)
        yield chunk
