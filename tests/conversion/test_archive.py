from __future__ import annotations

import gzip
import io
import os
import random
import tarfile
import time
import tracemalloc
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversion.archive import (
    Entry,
    SourceRefused,
    document_name,
    inspect_entry,
    no_tar_header,
    pack_entry,
    source_open,
)
from tests.support import TEX_DOCUMENT, TEX_FRAGMENT, write_targz, write_tex, write_zero_bomb, write_zip


def test_a_lone_tex_file_is_its_own_main_file(tmp_path):
    entry = inspect_entry(write_tex(tmp_path / "paper.tex"), "paper.tex")
    assert (entry.name, entry.kind, entry.main_file, entry.problem) == ("paper", "tex", "paper.tex", "")


def test_the_only_tex_file_of_a_directory_is_main_even_without_documentclass(tmp_path):
    write_tex(tmp_path / "d" / "plain.tex", "Plain TeX \\bye")
    assert inspect_entry(tmp_path / "d", "d").main_file == "plain.tex"


def test_among_several_the_one_with_documentclass_is_main(tmp_path):
    write_tex(tmp_path / "d" / "a_part.tex", TEX_FRAGMENT)
    write_tex(tmp_path / "d" / "z_main.tex", TEX_DOCUMENT)
    write_tex(tmp_path / "d" / "sub" / "more.tex", TEX_FRAGMENT)
    assert inspect_entry(tmp_path / "d", "d").main_file == "z_main.tex"


def test_a_documentclass_quoted_in_text_loses_to_one_that_opens_its_line(tmp_path):
    # As in a real paper: a file of macros explains their use "after \verb|\documentclass{article}| but
    # before \verb|\begin{document}|", and sorts before the main file.
    quoting = "\\section{Macros}\nUse after \\verb|\\documentclass{article}|, before \\verb|\\begin{document}|.\n"
    write_tex(tmp_path / "d" / "macros.tex", quoting)
    write_tex(tmp_path / "d" / "paper.tex", "\\pdfoutput=1\n" + TEX_DOCUMENT)
    assert inspect_entry(tmp_path / "d", "d").main_file == "paper.tex"
    # With no file whose line starts with one, a \documentclass further along a line still counts.
    write_tex(tmp_path / "e" / "a.tex", TEX_FRAGMENT)
    write_tex(tmp_path / "e" / "b.tex", "\\relax\\documentclass{article}\\begin{document}x\\end{document}")
    assert inspect_entry(tmp_path / "e", "e").main_file == "b.tex"


def test_a_commented_documentclass_does_not_count(tmp_path):
    write_tex(tmp_path / "d" / "a.tex", "% \\documentclass{article}\n" + TEX_FRAGMENT)
    write_tex(tmp_path / "d" / "b.tex", "\\begin{document}x\\end{document}")
    assert inspect_entry(tmp_path / "d", "d").main_file == "b.tex"


def test_a_directory_without_a_usable_main_file_is_invalid_with_a_reason(tmp_path):
    (tmp_path / "empty").mkdir()
    write_tex(tmp_path / "frags" / "a.tex", TEX_FRAGMENT)
    write_tex(tmp_path / "frags" / "b.tex", TEX_FRAGMENT)
    empty, frags = inspect_entry(tmp_path / "empty", "empty"), inspect_entry(tmp_path / "frags", "frags")
    assert (empty.problem, empty.detail) == ("no_main_file", "no .tex file")
    assert frags.problem == "no_main_file" and "documentclass" in frags.detail


def test_zip_and_tar_archives_find_their_main_file(tmp_path):
    z = inspect_entry(
        write_zip(tmp_path / "1234.5678.zip", {"x/main.tex": TEX_DOCUMENT, "x/s.tex": TEX_FRAGMENT}), "1234.5678.zip"
    )
    t = inspect_entry(write_targz(tmp_path / "a.tar.gz", {"ms.tex": TEX_DOCUMENT, "fig.tex": TEX_FRAGMENT}), "a.tar.gz")
    assert (z.name, z.kind, z.main_file) == ("1234.5678", "zip", "x/main.tex")
    assert (t.name, t.kind, t.main_file) == ("a", "tar.gz", "ms.tex")


def test_arxiv_gz_is_a_tar_or_a_single_gzipped_tex(tmp_path):
    tar = inspect_entry(write_targz(tmp_path / "t.gz", {"main.tex": TEX_DOCUMENT}), "t.gz")
    single = tmp_path / "s.gz"
    single.write_bytes(gzip.compress(TEX_DOCUMENT.encode()))
    assert tar.main_file == "main.tex"
    assert inspect_entry(single, "s.gz").main_file == "s.tex"


def test_corrupt_archives_are_invalid_archive_not_a_crash(tmp_path):
    for name in ("bad.zip", "bad.tar.gz", "bad.gz"):
        (tmp_path / name).write_bytes(b"PK\x03\x04 this is not really an archive" * 3)
        entry = inspect_entry(tmp_path / name, name)
        assert entry.problem in ("archive", "binary") and entry.main_file == "", name


def test_an_archive_without_tex_is_invalid_archive(tmp_path):
    entry = inspect_entry(write_zip(tmp_path / "figs.zip", {"fig.png": "not tex"}), "figs.zip")
    assert (entry.problem, entry.detail) == ("archive", "no main .tex file in the archive")


def test_a_zip_whose_members_escape_is_refused(tmp_path):
    for member in ("../evil.tex", "/etc/evil.tex", "a/../../evil.tex"):
        entry = inspect_entry(write_zip(tmp_path / "slip.zip", {member: TEX_DOCUMENT}), "slip.zip")
        assert entry.problem == "unsafe_archive" and member in entry.detail


def test_a_tar_whose_members_escape_is_refused(tmp_path):
    entry = inspect_entry(write_targz(tmp_path / "slip.tar.gz", {"../evil.tex": TEX_DOCUMENT}), "slip.tar.gz")
    assert entry.problem == "unsafe_archive"


def test_binary_and_unknown_entries_are_invalid(tmp_path):
    (tmp_path / "bin.tex").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.4")
    assert inspect_entry(tmp_path / "bin.tex", "bin.tex").problem == "binary"
    assert inspect_entry(tmp_path / "paper.pdf", "paper.pdf").problem == "unsupported"


def _tarfile_reads(data: bytes) -> bool:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:"):
            return True
    except tarfile.TarError:
        return False


def _tar_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# Checksum fields on the edges of what tarfile reads as a number (see conversion.archive.no_tar_header).
_CHECKSUM_BYTES = st.lists(
    st.sampled_from(b"0123456789+-_oOxX \t\n\r\x0b\x0c\x1c\x1f\x00\x80\xffa{"), min_size=8, max_size=8
)


@settings(max_examples=2000, deadline=None)
@given(head=st.binary(max_size=600), checksum=_CHECKSUM_BYTES, tail=st.binary(max_size=40))
def test_a_block_said_to_hold_no_tar_header_is_one_tarfile_refuses(head, checksum, tail):
    data = head[:148].ljust(148, b" ") + bytes(checksum) + head[156:] + tail if len(head) > 100 else head
    if no_tar_header(data):
        assert not _tarfile_reads(data)


def test_real_tars_and_their_checksums_are_never_taken_for_something_else():
    members = {"ms.tex": TEX_DOCUMENT.encode(), "b.tex": b"x" * 700}
    for data in (_tar_of(members), _tar_of({}), b"\x00" * 1024, _tar_of({"a" * 120 + ".tex": b"y"})):
        assert _tarfile_reads(data) and not no_tar_header(data)
    # A checksum that tarfile reads (with a sign, a prefix or spaces) but that is wrong: tarfile decides.
    assert not no_tar_header(b"x" * 148 + b"+0o17 \x00\x00" + b"x" * 356)
    # Text such as the start of a gzipped .tex, and anything shorter than a block.
    assert no_tar_header(TEX_DOCUMENT.encode() * 20)
    assert no_tar_header(b"x" * 511)


def test_short_names_drop_the_archive_or_tex_suffix():
    assert [document_name(n) for n in ("a.tar.gz", "b.TGZ", "c.zip", "d.gz", "e.tex", "f", ".tex")] == [
        "a", "b", "c", "d", "e", "f", ".tex",
    ]  # fmt: skip


def test_special_files_and_dangling_links_are_invalid_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.tex")
    (tmp_path / "gone.tex").symlink_to(tmp_path / "nowhere.tex")
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "a.tex")
    write_tex(tmp_path / "d" / "b.tex")
    assert inspect_entry(tmp_path / "pipe.tex", "pipe.tex").problem == "unsupported"
    assert inspect_entry(tmp_path / "gone.tex", "gone.tex").problem == "unreadable"
    assert inspect_entry(tmp_path / "d", "d").main_file == "b.tex"


# --- damaged archives: the inspector describes them, it never raises --------------------------------


def _archive_kinds(tmp_path) -> dict[str, bytes]:
    """A valid archive of every kind the inspector reads, by entry name."""
    members = {"main.tex": TEX_DOCUMENT * 20, "sec/part.tex": TEX_FRAGMENT * 20}
    tar = write_targz(tmp_path / "src.tar.gz", members).read_bytes()
    return {
        "a.zip": write_zip(tmp_path / "src.zip", members).read_bytes(),
        "a.tar.gz": tar,
        "a.tgz": tar,
        "tar.gz": tar,  # arXiv's .gz of a tar
        "tex.gz": gzip.compress((TEX_DOCUMENT * 50).encode()),  # arXiv's .gz of a single .tex
    }


def _check_inspected(path, name: str) -> None:
    entry = inspect_entry(path, name)
    assert isinstance(entry, Entry)
    assert bool(entry.main_file) != bool(entry.problem), entry


def test_truncated_and_mutated_archives_of_every_kind_become_problems_never_exceptions(tmp_path):
    rng = random.Random(13)
    deadline = time.monotonic() + 60
    cases = 0
    for name, data in _archive_kinds(tmp_path).items():
        entry_name = name if name.endswith((".zip", ".tgz")) or name == "a.tar.gz" else f"x{name[-3:]}"
        path = tmp_path / entry_name
        assert inspect_entry(_write(path, data), entry_name).main_file, name  # the intact one is valid
        step = max(len(data) // 150, 1)
        for cut in range(0, len(data), step):
            _check_inspected(_write(path, data[:cut]), entry_name)
            cases += 1
        for _ in range(300):
            mutated = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            if rng.random() < 0.2:  # a run of random bytes, as a damaged block would be
                at = rng.randrange(len(mutated))
                mutated[at : at + 64] = rng.randbytes(64)
            _check_inspected(_write(path, bytes(mutated)), entry_name)
            cases += 1
        assert time.monotonic() < deadline, "the fuzz cases must stay bounded in time"
    assert cases > 5 * 400


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_gzip_whose_deflate_stream_is_damaged_is_an_archive_problem(tmp_path):
    data = bytearray(gzip.compress((TEX_DOCUMENT * 200).encode()))
    data[30:40] = b"\xff" * 10  # zlib.error: invalid block type / distance
    entry = inspect_entry(_write(tmp_path / "bad.gz", bytes(data)), "bad.gz")
    assert entry.problem == "archive" and entry.detail, entry


# --- reads confined to the corpus roots --------------------------------------------------------------


def test_an_entry_linking_out_of_the_roots_is_refused_and_links_inside_stay(tmp_path):
    root = tmp_path / "root"
    write_tex(tmp_path / "outside.tex")
    write_tex(root / "other" / "shared.tex")
    (root / "corpus").mkdir()
    (root / "corpus" / "out.tex").symlink_to(tmp_path / "outside.tex")
    (root / "corpus" / "in.tex").symlink_to(root / "other" / "shared.tex")
    with pytest.raises(SourceRefused) as refused:
        source_open(root / "corpus" / "out.tex", [root])
    assert refused.value.what == "unsafe_path"
    assert inspect_entry(root / "corpus" / "out.tex", "out.tex", roots=[root]).problem == "unsafe_path"
    assert inspect_entry(root / "corpus" / "in.tex", "in.tex", roots=[root]).main_file == "in.tex"


def test_a_link_swapped_in_after_the_path_was_resolved_is_not_followed(tmp_path, monkeypatch):
    root = tmp_path / "root"
    write_tex(tmp_path / "outside" / "secret.tex", "OUTSIDE")
    entry = write_tex(root / "corpus" / "paper.tex")
    resolved = os.path.realpath(entry)
    # The race: the check resolved the real file, then the file (or a directory above it) became a link.
    realpath = os.path.realpath
    monkeypatch.setattr(
        "conversion.archive.os.path.realpath", lambda path: resolved if str(path) == str(entry) else realpath(path)
    )
    entry.unlink()
    entry.symlink_to(tmp_path / "outside" / "secret.tex")
    with pytest.raises(SourceRefused, match="swapped"):
        pack_entry(entry, "tex", "paper.tex", roots=[root])
    entry.unlink()
    write_tex(entry)
    (root / "corpus").rename(root / "moved")
    (root / "corpus").symlink_to(tmp_path / "outside")
    with pytest.raises(SourceRefused, match="swapped"):
        pack_entry(entry, "tex", "paper.tex", roots=[root])


def test_links_inside_a_directory_entry_are_packed_only_when_they_stay_inside_it(tmp_path):
    root = tmp_path / "root"
    write_tex(root / "corpus" / "d" / "main.tex")
    write_tex(root / "corpus" / "d" / "sub" / "part.tex", TEX_FRAGMENT)
    write_tex(root / "corpus" / "sibling.tex", "SIBLING")
    write_tex(tmp_path / "outside.tex", "OUTSIDE")
    (root / "corpus" / "d" / "part-link.tex").symlink_to(root / "corpus" / "d" / "sub" / "part.tex")
    (root / "corpus" / "d" / "sibling.tex").symlink_to(root / "corpus" / "sibling.tex")
    (root / "corpus" / "d" / "out.tex").symlink_to(tmp_path / "outside.tex")
    (root / "corpus" / "d" / "outdir").symlink_to(tmp_path)
    with zipfile.ZipFile(io.BytesIO(pack_entry(root / "corpus" / "d", "dir", "d", roots=[root]))) as archive:
        assert sorted(archive.namelist()) == ["main.tex", "part-link.tex", "sub/part.tex"]
    assert inspect_entry(root / "corpus" / "d", "d", roots=[root]).main_file == "main.tex"


# --- packing damaged and oversized entries -----------------------------------------------------------


def test_packing_a_damaged_archive_refuses_it_as_an_archive_problem(tmp_path):
    noise = random.Random(4).randbytes(20_000).hex()  # incompressible: each cut lands inside the member
    data = write_targz(tmp_path / "t.tar.gz", {"main.tex": TEX_DOCUMENT + noise}).read_bytes()
    for cut in (len(data) // 2, len(data) * 3 // 4):
        _write(tmp_path / "t.tar.gz", data[:cut])
        with pytest.raises(SourceRefused) as refused:
            pack_entry(tmp_path / "t.tar.gz", "tar.gz", "t.tar.gz")
        assert refused.value.what == "archive"
    damaged = bytearray(gzip.compress((TEX_DOCUMENT * 200).encode()))
    damaged[30:40] = b"\xff" * 10
    with pytest.raises(SourceRefused) as refused:
        pack_entry(_write(tmp_path / "s.gz", bytes(damaged)), "gz", "s.gz")
    assert refused.value.what == "archive"


def test_a_decompression_bomb_stops_at_the_limit_with_bounded_memory(tmp_path):
    bomb = write_zero_bomb(tmp_path / "bomb.tar.gz", 256 * 1024 * 1024)
    assert bomb.stat().st_size < 2 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(SourceRefused) as refused:
            pack_entry(bomb, "tar.gz", "bomb.tar.gz", max_bytes=128 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.what == "too_large" and "larger than 134217728 bytes" in str(refused.value)
    assert peak < 16 * 1024 * 1024, f"peak {peak} bytes while reading 128 MiB"
