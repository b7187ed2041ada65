"""The project's documents say what is: every module path they cite exists, and they cite no document
the repository does not hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")),
             "bench/README.md"]  # fmt: skip
# The README is the front door: what the service is, the two commands, what `up` starts, a map of docs/.
README_MAX_BYTES = 12_000
# `corpora/task_changes.py`, `config/api/requests.py`: a path of the tree ending in .py, not part of a longer one.
MODULE_PATH = re.compile(r"(?<![\w./-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*\.py)\b")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_module_a_document_cites_exists(document):
    cited = set(MODULE_PATH.findall((ROOT / document).read_text()))
    assert sorted(path for path in cited if not (ROOT / path).is_file()) == []


def test_the_pattern_reads_the_modules_the_documents_cite():
    for document in ("docs/architecture.md", "docs/decisions.md", "bench/README.md"):
        assert MODULE_PATH.findall((ROOT / document).read_text()), f"{document}: the pattern no longer reads it"


def test_the_readme_stays_a_front_door():
    assert (ROOT / "README.md").stat().st_size <= README_MAX_BYTES


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_relative_link_of_a_document_leads_to_a_file(document):
    text = (ROOT / document).read_text()
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)
    local = [target for target in targets if not re.match(r"^[a-z]+:", target)]
    base = (ROOT / document).parent
    assert sorted(target for target in local if not (base / target).exists()) == []


def test_no_file_cites_a_design_document_the_repository_does_not_hold():
    offenders = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {".venv", ".git", "var", "static"} or path.suffix not in {".py", ".md", ".html"}:
            continue
        if re.search(r"\bDESIGN(?:\.md)?\b", path.read_text(errors="replace")) and path != Path(__file__):
            offenders.append(relative)
    assert offenders == []
