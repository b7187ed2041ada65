"""Source context: the lines of a document's own files around a message's location, from each kind of
entry, never from a file outside it, and bounded however large the file or its lines."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest

from conversion import source_context
from conversion.source_context import Location, location_of, source_contexts
from tests.support import write_targz, write_tex, write_zip

# Line N holds "line N"; line 5 holds markup that must stay text wherever it is shown.
LINES = [f"line {n}" for n in range(1, 11)]
LINES[4] = "\\section{<script>alert(1)</script> & more}"
TEXT = "\n".join(LINES) + "\n"
MAIN = "\\documentclass{article}\n\\begin{document}\n\\input{sec/part}\n\\end{document}\n"


def _entry(root: Path, kind: str) -> tuple[Path, str, str]:
    """An entry of each kind holding main.tex and sec/part.tex (TEXT), as (path, kind, main file)."""
    members = {"main.tex": MAIN, "sec/part.tex": TEXT}
    if kind == "dir":
        for name, text in members.items():
            write_tex(root / "d" / name, text)
        return root / "d", "dir", "main.tex"
    if kind == "zip":
        return write_zip(root / "d.zip", members), "zip", "main.tex"
    if kind in ("tar.gz", "gz"):
        return write_targz(root / f"d.{kind}", members), kind, "main.tex"
    raise AssertionError(kind)


def _contexts(path: Path, kind: str, main: str, *details: str):
    return source_contexts(path, kind, main, path.name, [location_of(d) for d in details], [path.parent])


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ("Missing\nat lai_comment.tex; line 14 col 11 - line 14 col 11", Location("lai_comment.tex", 14, 11, 14, 11)),
        ("at paper.tex; line 34 col 5", Location("paper.tex", 34, 5)),
        ("at paper.tex; line 34", Location("paper.tex", 34)),
        ("at paper.tex; from line 10 col 1 to line 12 col 3", Location("paper.tex", 10, 1, 12, 3)),
        ("In \\foo\nat my file.tex; line 2 col 0\nmore", Location("my file.tex", 2, 0)),
        ("at String; line 0 col 0", None),
        ("no location here", None),
        ("the text at paper.tex; line 3 is not a line of its own", None),
    ],
)
def test_a_location_is_read_from_the_details_as_latexml_writes_it(details, expected):
    assert location_of(details) == expected


@pytest.mark.parametrize("kind", ["dir", "zip", "tar.gz", "gz"])
def test_a_message_at_line_n_shows_lines_n_minus_2_to_n_plus_2_of_its_file(tmp_path, kind):
    path, kind, main = _entry(tmp_path, kind)
    [context] = _contexts(path, kind, main, "at part.tex; line 5 col 10")
    assert context.file == "sec/part.tex"
    assert [(line.number, line.text, line.marked) for line in context.lines] == [
        (3, "line 3", False), (4, "line 4", False), (5, LINES[4], True), (6, "line 6", False), (7, "line 7", False),
    ]  # fmt: skip
    assert (context.line, context.column) == (5, 10)


def test_a_lone_tex_file_and_a_gzipped_tex_are_read_too(tmp_path):
    tex = write_tex(tmp_path / "paper.tex", TEXT)
    [context] = _contexts(tex, "tex", "paper.tex", "at paper.tex; line 1 col 0")
    assert [line.number for line in context.lines] == [1, 2, 3]
    (tmp_path / "single.gz").write_bytes(gzip.compress(TEXT.encode()))
    [context] = _contexts(tmp_path / "single.gz", "gz", "single.tex", "at single.tex; line 10")
    assert [(line.number, line.text) for line in context.lines] == [(8, "line 8"), (9, "line 9"), (10, "line 10")]


def test_a_range_marks_its_lines_and_shows_two_lines_after_its_end(tmp_path):
    path, kind, main = _entry(tmp_path, "dir")
    [context] = _contexts(path, kind, main, "at part.tex; from line 4 col 1 to line 6 col 3")
    assert [(line.number, line.marked) for line in context.lines] == [
        (2, False), (3, False), (4, True), (5, True), (6, True), (7, False), (8, False),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "details",
    [
        "at article.cls.ltxml; line 40 col 2",  # a binding of LaTeXML
        "at amsmath.sty; line 3",  # a package of TeX Live, which the entry does not hold
        "at ../../etc/passwd; line 1",  # a path climbing out
        "at /etc/passwd; line 1",
        "at sec/part.tex; line 1",  # LaTeXML writes base names only
        "at part.tex; line 11",  # a line the file does not have
        "at String; line 1 col 0",
    ],
)
def test_a_location_outside_the_documents_own_files_has_no_context(tmp_path, details):
    for kind in ("dir", "tar.gz"):
        (tmp_path / kind).mkdir()
        path, kind, main = _entry(tmp_path / kind, kind)
        assert _contexts(path, kind, main, details) == [None], kind


def test_a_link_out_of_a_directory_entry_is_not_followed(tmp_path):
    write_tex(tmp_path / "d" / "main.tex", MAIN)
    (tmp_path / "secret.tex").write_text("secret line\n")
    os.symlink(tmp_path / "secret.tex", tmp_path / "d" / "secret.tex")
    assert _contexts(tmp_path / "d", "dir", "main.tex", "at secret.tex; line 1") == [None]
    # Nor is an entry that is itself a link out of the corpus root.
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(tmp_path / "d", root / "d")
    assert source_contexts(root / "d", "dir", "main.tex", "d", [location_of("at main.tex; line 1")], [root]) == [None]


def test_a_name_that_two_files_share_has_no_context(tmp_path):
    write_tex(tmp_path / "d" / "main.tex", MAIN)
    write_tex(tmp_path / "d" / "a" / "part.tex", TEXT)
    write_tex(tmp_path / "d" / "b" / "part.tex", TEXT)
    assert _contexts(tmp_path / "d", "dir", "main.tex", "at part.tex; line 2", "at main.tex; line 2")[0] is None
    assert _contexts(tmp_path / "d", "dir", "main.tex", "at main.tex; line 2")[0].lines[1].text == "\\begin{document}"


def test_several_locations_in_one_file_are_read_in_one_pass(tmp_path):
    path, kind, main = _entry(tmp_path, "tar.gz")
    first, second, none = _contexts(path, kind, main, "at part.tex; line 1", "at main.tex; line 3", "nothing")
    assert first.lines[0].text == "line 1" and second.lines[2].text == "\\input{sec/part}" and none is None


def test_a_long_line_is_shown_as_a_window_around_its_column(tmp_path):
    long = "x" * 5000 + "HERE" + "y" * 5000
    write_tex(tmp_path / "d" / "main.tex", f"short\n{long}\nafter {'z' * 1000}\n")
    [context] = _contexts(tmp_path / "d", "dir", "main.tex", "at main.tex; line 2 col 5000")
    line = context.lines[1]
    assert len(line.text) == source_context.LINE_CHARS and line.clipped and line.offset > 0
    assert line.text[5000 - line.offset : 5000 - line.offset + 4] == "HERE"
    assert context.lines[2].offset == 0 and context.lines[2].clipped and context.lines[2].text.startswith("after z")


def test_a_huge_file_or_a_huge_line_costs_little(tmp_path):
    # 64 MiB of one line, and a file whose wanted line lies past the read limit: both bounded.
    big = tmp_path / "d" / "main.tex"
    big.parent.mkdir()
    with big.open("wb") as handle:
        handle.write(b"a" * (64 * 1024 * 1024) + b"\nsecond\n")
    began = time.perf_counter()
    [context] = _contexts(tmp_path / "d", "dir", "main.tex", "at main.tex; line 1 col 3")
    assert context.lines[0].clipped and len(context.lines[0].text) == source_context.LINE_CHARS
    assert _contexts(tmp_path / "d", "dir", "main.tex", "at main.tex; line 2") == [None]  # past READ_MAX_BYTES
    assert time.perf_counter() - began < 1.0


def test_an_archive_larger_than_the_limit_is_not_opened(tmp_path, monkeypatch):
    path, kind, main = _entry(tmp_path, "tar.gz")
    monkeypatch.setattr(source_context, "ARCHIVE_MAX_BYTES", path.stat().st_size - 1)
    assert _contexts(path, kind, main, "at part.tex; line 5") == [None]


def test_a_damaged_or_missing_entry_gives_no_context(tmp_path):
    (tmp_path / "bad.tar.gz").write_bytes(b"\x1f\x8b not really")
    assert _contexts(tmp_path / "bad.tar.gz", "tar.gz", "main.tex", "at main.tex; line 1") == [None]
    assert _contexts(tmp_path / "gone", "dir", "main.tex", "at main.tex; line 1") == [None]
