from __future__ import annotations

import gzip

from conversion.archive import document_name, inspect_entry
from tests.support import TEX_DOCUMENT, TEX_FRAGMENT, write_targz, write_tex, write_zip


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
