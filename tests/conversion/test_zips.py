"""The hand-written ZIP writer and reader agree with `zipfile`, the reference, on every archive."""

from __future__ import annotations

import gzip
import io
import os
import time
import zipfile

import pytest

from conversion.archive import PAYLOAD_MAX_BYTES, pack_entry
from conversion.zips import ZipTooLarge, zip_build, zip_member, zip_stream
from tests.support import TEX_DOCUMENT, write_targz, write_tex, write_zip

LOG = b"Warning:undefined:\\foo The token \\foo is not defined.\n\tat main.tex; line 3\nStatus:conversion:1\n"
HTML = b"<!DOCTYPE html><html><body><p>Document.</p></body></html>\n"
WHEN = time.mktime((2024, 5, 17, 13, 45, 30, 0, 0, -1))


def zipfile_archive(members: list[tuple[str, bytes]], **options) -> bytes:
    compression = options.pop("compression", zipfile.ZIP_DEFLATED)
    comment = options.pop("comment", b"")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression, **options) as archive:
        for name, content in members:
            archive.writestr(name, content)
        archive.comment = comment
    return buffer.getvalue()


def test_a_built_archive_reads_back_in_zipfile_with_names_contents_times_and_modes():
    members = [("cortex.log", LOG, WHEN), ("sub/dir/main.html", HTML, WHEN), ("empty.txt", b"", WHEN)]
    members.append(("Straße/naïve.tex", "\\section{ü}".encode(), WHEN))
    data = zip_build(members)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert archive.namelist() == [name for name, _, _ in members]
        for (name, content, _), info in zip(members, archive.infolist(), strict=True):
            assert archive.read(name) == content
            assert info.date_time == (2024, 5, 17, 13, 45, 30)
            assert info.compress_type == zipfile.ZIP_DEFLATED
            assert info.external_attr >> 16 == 0o100644
    assert zip_member(data, "Straße/naïve.tex") == "\\section{ü}".encode()


def test_a_time_before_1980_is_clamped_where_zipfile_would_refuse_the_file():
    data = zip_build([("old.tex", b"x", 0.0)])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.getinfo("old.tex").date_time == (1980, 1, 1, 0, 0, 0)


def test_an_archive_with_more_members_than_a_plain_zip_holds_is_written_with_zip64():
    members = [(f"f{index}", b"", WHEN) for index in range(70_000)]
    data = zip_build(members)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert len(archive.namelist()) == 70_000
    assert zip_member(data, "f69999") == b""


@pytest.mark.parametrize(
    "options",
    [
        {"compression": zipfile.ZIP_STORED},
        {"compression": zipfile.ZIP_DEFLATED, "compresslevel": 9},
        {"compression": zipfile.ZIP_BZIP2},  # a method read only by zipfile
        {"comment": b"an archive comment"},
    ],
)
def test_a_member_reads_as_zipfile_reads_it(options):
    data = zipfile_archive([("main.html", HTML), ("cortex.log", LOG)], **options)
    assert zip_member(data, "cortex.log") == LOG == zipfile.ZipFile(io.BytesIO(data)).read("cortex.log")


def test_zip64_records_data_descriptors_and_prepended_bytes_read_as_in_zipfile():
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        archive.open("cortex.log", "w", force_zip64=True) as handle,
    ):
        handle.write(LOG)
    assert zip_member(buffer.getvalue(), "cortex.log") == LOG

    class Unseekable(io.RawIOBase):  # zipfile then writes sizes in a data descriptor after the data
        def __init__(self):
            self.chunks = []

        def writable(self):
            return True

        def write(self, chunk):
            self.chunks.append(bytes(chunk))
            return len(chunk)

    stream = Unseekable()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("main.html", HTML)
        archive.writestr("cortex.log", LOG)
    streamed = b"".join(stream.chunks)
    assert zipfile.ZipFile(io.BytesIO(streamed)).getinfo("cortex.log").flag_bits & 0x08
    assert zip_member(streamed, "cortex.log") == LOG
    assert zip_member(b"#!/bin/sh\nexit 0\n" + streamed, "cortex.log") == LOG


def test_of_two_members_with_the_same_name_the_last_counts_as_in_zipfile():
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = zipfile_archive([("cortex.log", b"first\n"), ("cortex.log", LOG)])
    assert zip_member(data, "cortex.log") == LOG == zipfile.ZipFile(io.BytesIO(data)).read("cortex.log")


def test_a_missing_member_is_a_key_error_and_non_archives_are_bad_zip_files():
    data = zip_build([("main.html", HTML, WHEN)])
    with pytest.raises(KeyError):
        zip_member(data, "cortex.log")
    for garbage in (b"", b"PK", b"not a zip at all" * 10, b"PK\x05\x06" + b"\x00" * 18):
        with pytest.raises((zipfile.BadZipFile, KeyError)):
            zip_member(garbage, "cortex.log")


def test_an_encrypted_member_is_a_bad_zip_file_not_a_runtime_error():
    data = bytearray(zip_build([("cortex.log", LOG, WHEN)]))
    data[6] |= 0x01  # the encrypted flag, in the local header and in the central directory
    data[data.index(b"PK\x01\x02") + 8] |= 0x01
    with pytest.raises(RuntimeError):
        zipfile.ZipFile(io.BytesIO(bytes(data))).read("cortex.log")
    with pytest.raises(zipfile.BadZipFile, match="encrypted"):
        zip_member(bytes(data), "cortex.log")


def damaged(data: bytes):
    for length in range(len(data)):
        yield data[:length]
    for position in range(len(data)):
        for value in (0x00, 0xFF, data[position] ^ 0x01):
            if value != data[position]:
                yield data[:position] + bytes([value]) + data[position + 1 :]


@pytest.mark.parametrize("writer", ["zip_build", "zipfile"])
def test_a_damaged_archive_never_yields_content_that_zipfile_would_not_and_raises_only_bad_zip_or_key_error(writer):
    members = [("main.html", HTML), ("cortex.log", LOG)]
    data = zip_build([(n, c, WHEN) for n, c in members]) if writer == "zip_build" else zipfile_archive(members)
    cases = 0
    for variant in damaged(data):
        cases += 1
        try:
            expected = zipfile.ZipFile(io.BytesIO(variant)).read("cortex.log")
        except Exception:  # any refusal of zipfile's
            expected = None
        try:
            got = zip_member(variant, "cortex.log")
        except (zipfile.BadZipFile, KeyError):
            got = None
        # Content comes back only after its CRC-32 checked out: when zipfile reads it, so does this.
        if expected is not None:
            assert got == expected
        elif got is not None:
            assert got == LOG
    assert cases > 3 * len(data)


# --- pack_entry, built on zip_build ----------------------------------------------------------------


def unpacked(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {name: archive.read(name) for name in archive.namelist()}


def test_pack_a_lone_tex_file_under_its_entry_name(tmp_path):
    path = write_tex(tmp_path / "paper.tex")
    assert unpacked(pack_entry(path, "tex", "paper.tex")) == {"paper.tex": TEX_DOCUMENT.encode()}


def test_pack_a_directory_leaves_out_hidden_directories_and_links_out_of_it(tmp_path):
    write_tex(tmp_path / "d" / "main.tex")
    (tmp_path / "d" / "fig").mkdir()
    (tmp_path / "d" / "fig" / "a.png").write_bytes(b"\x89PNG\x00\xff")
    (tmp_path / "d" / ".git").mkdir()
    (tmp_path / "d" / ".git" / "config").write_text("x")
    (tmp_path / "secret").write_text("outside")
    os.symlink(tmp_path / "secret", tmp_path / "d" / "leak.txt")
    assert unpacked(pack_entry(tmp_path / "d", "dir", "d")) == {
        "main.tex": TEX_DOCUMENT.encode(),
        "fig/a.png": b"\x89PNG\x00\xff",
    }


def test_pack_a_zip_as_it_is_and_archives_repacked(tmp_path):
    zipped = write_zip(tmp_path / "z.zip", {"main.tex": TEX_DOCUMENT})
    assert pack_entry(zipped, "zip", "z.zip") == zipped.read_bytes()
    tarred = write_targz(tmp_path / "t.tar.gz", {"main.tex": TEX_DOCUMENT, "../escape.tex": "x"})
    assert unpacked(pack_entry(tarred, "tar.gz", "t.tar.gz")) == {"main.tex": TEX_DOCUMENT.encode()}
    single = tmp_path / "s.gz"
    single.write_bytes(gzip.compress(TEX_DOCUMENT.encode()))
    assert unpacked(pack_entry(single, "gz", "s.gz")) == {"s.tex": TEX_DOCUMENT.encode()}


def test_pack_refuses_an_unknown_kind_and_a_packed_document_over_the_limit(tmp_path, monkeypatch):
    path = write_tex(tmp_path / "paper.tex")
    with pytest.raises(ValueError, match="kind"):
        pack_entry(path, "other", "paper.tex")
    monkeypatch.setattr("conversion.archive.PAYLOAD_MAX_BYTES", 50)
    assert PAYLOAD_MAX_BYTES > 50
    with pytest.raises(ValueError, match="larger than 50 bytes"):
        pack_entry(path, "tex", "paper.tex")


def test_zip_stream_writes_what_zipfile_reads_and_stops_past_the_limit():
    now = time.time()
    members = [
        ("a.tex", [b"x" * 70_000, b"", b"y" * 5], now), ("d/\u00e9.png", [bytes(range(256)) * 40], now), ("e", [], now),
    ]  # fmt: skip
    data = zip_stream(members, max_bytes=70_005 + 10_240)
    assert unpacked(data) == {"a.tex": b"x" * 70_000 + b"y" * 5, "d/\u00e9.png": bytes(range(256)) * 40, "e": b""}
    with pytest.raises(ZipTooLarge):
        zip_stream(members, max_bytes=70_005 + 10_239)
    read: list[int] = []

    def endless():
        while True:
            read.append(1)
            yield bytes(1000)

    with pytest.raises(ZipTooLarge):
        zip_stream([("zeros", endless(), now)], max_bytes=50_000)
    assert len(read) == 51  # it stops at the first chunk past the limit
