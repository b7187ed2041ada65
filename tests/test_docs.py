"""The project's documents say what is: every module path they cite exists, and they cite no document
the repository does not hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "docs/architecture.md", "docs/decisions.md", "bench/README.md"]
# `corpora/lifecycle.py`, `config/api/requests.py`: a path of the tree ending in .py, not part of a longer one.
MODULE_PATH = re.compile(r"(?<![\w./-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*\.py)\b")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_module_a_document_cites_exists(document):
    cited = set(MODULE_PATH.findall((ROOT / document).read_text()))
    assert cited, f"{document} cites no module: the pattern no longer reads it"
    assert sorted(path for path in cited if not (ROOT / path).is_file()) == []


def test_no_file_cites_a_design_document_the_repository_does_not_hold():
    offenders = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {".venv", ".git", "var", "static"} or path.suffix not in {".py", ".md", ".html"}:
            continue
        if re.search(r"\bDESIGN(?:\.md)?\b", path.read_text(errors="replace")) and path != Path(__file__):
            offenders.append(relative)
    assert offenders == []
