"""One check of archive member names (conversion.zips.member_name_problem), applied by every reader of an
archive: the import's inspection of a corpus entry, the worker's unpacking of a payload and the dataset
export's copy of a result archive (the result file view is tested in tests/reports/test_views.py). Each
path is given the hostile names its archive format can carry."""

from __future__ import annotations

import io
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversion import zips
from conversion.archive import inspect_entry
from conversion.worker import InvalidPayload, unpack_payload
from conversion.zips import member_name_problem, member_name_safe
from corpora.results import result_copy
from tests.support import TEX_DOCUMENT, write_targz, write_zip

# name → what the check says of it
HOSTILE = {
    "/etc/evil.tex": "an absolute path",
    "../evil.tex": "a '..' segment",
    "a/../../evil.tex": "a '..' segment",
    "a\\b.tex": "a backslash",
    "..\\evil.tex": "a backslash",
    "C:evil.tex": "a drive letter",
    "c:/evil.tex": "a drive letter",
    "a//evil.tex": "an empty segment",
    "a/b/": "an empty segment",
    "a\x00b.tex": "a NUL character",
    "": "an empty name",
}
# Names of files that zipfile and tarfile write and read back as they are (they cut a name at a NUL, none
# can be empty, and a name ending with '/' is a directory entry, checked as one).
CARRIED = [name for name in HOSTILE if name and "\x00" not in name and not name.endswith("/")]
SAFE = ["main.tex", "./main.tex", "sub/fig.png", "a.b/c..d.tex", "ab:c.tex", "é/ü.tex"]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_every_hostile_name_is_refused_with_its_reason(name):
    assert member_name_problem(name) == HOSTILE[name]


@pytest.mark.parametrize("name", SAFE)
def test_names_that_stay_inside_pass(name):
    assert member_name_problem(name) is None


@given(st.text(alphabet="/.\\\x00:Ca\u00e9\n", max_size=12), st.booleans())
def test_the_fast_check_agrees_with_the_reasons_on_text_and_on_header_bytes(name, directory):
    """The export and the import ask member_name_safe (one pattern); messages come from member_name_problem."""
    expected = member_name_problem(name, directory=directory) is None
    assert member_name_safe(name, directory=directory) == expected
    assert member_name_safe(name.encode(), directory=directory) == expected


def test_a_directory_entry_may_end_with_one_slash_and_no_more():
    assert member_name_problem("sub/", directory=True) is None
    assert member_name_problem("sub//", directory=True) == "an empty segment"
    assert member_name_problem("/", directory=True) == "an empty name"


@pytest.mark.parametrize("name", CARRIED)
def test_the_import_refuses_a_corpus_zip_or_tarball_holding_the_name(tmp_path, name):
    members = {"main.tex": TEX_DOCUMENT, name: TEX_DOCUMENT}
    for entry in (write_zip(tmp_path / "doc.zip", members), write_targz(tmp_path / "doc.tar.gz", members)):
        inspected = inspect_entry(entry, entry.name)
        assert inspected.problem == "unsafe_archive", (entry.name, inspected)
        assert name in inspected.detail


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("name", CARRIED)
def test_the_worker_refuses_a_payload_holding_the_name_and_writes_nothing_outside(tmp_path, name):
    dest = tmp_path / "work" / "task"
    with pytest.raises(InvalidPayload, match="escapes the archive") as refused:
        unpack_payload(_zip({name: b"x", "main.tex": TEX_DOCUMENT.encode()}), dest)
    assert HOSTILE[name] in str(refused.value)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert all(path.startswith("work/task/") for path in written), written


def _named_raw(members: dict[str, bytes]) -> bytes:
    """A ZIP whose member names are exactly the given bytes (a NUL included), written with placeholders
    of the same length that are then replaced in the local and central headers."""
    placeholders = {name: bytes([0x41 + index]) * len(name.encode()) for index, name in enumerate(members)}
    data = _zip(
        {placeholder.decode(): body for placeholder, body in zip(placeholders.values(), members.values(), strict=True)}
    )
    for name, placeholder in placeholders.items():
        assert data.count(placeholder) == 2  # the local header and the central directory
        data = data.replace(placeholder, name.encode())
    return data


@pytest.mark.parametrize("through", ["own reader", "zipfile"])
def test_the_export_copies_no_hostile_member_of_a_result_archive(tmp_path, through):
    hostile = [name for name in HOSTILE if name and (through == "own reader" or "\x00" not in name)]
    members = {"doc.html": b"<html>kept</html>", **{name: b"out" for name in hostile if not name.endswith("/")}}
    source = tmp_path / "result.zip"
    data = _named_raw(members)
    if through == "zipfile":  # a comment sends the copy through zipfile instead of its own header reader
        data = data[:-2] + (7).to_bytes(2, "little") + b"comment"
    assert (zips._members_parse(data) is None) == (through == "zipfile")
    source.write_bytes(data)
    target = zips.ZipOut(tmp_path / "out.zip")
    result_copy(str(source), target, "doc/")
    target.close()
    with zipfile.ZipFile(tmp_path / "out.zip") as out:
        assert out.namelist() == ["doc/doc.html"]
        assert out.read("doc/doc.html") == b"<html>kept</html>"
