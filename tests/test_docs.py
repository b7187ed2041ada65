"""The project's documents say what is: every module path they cite exists, they cite no document the
repository does not hold, they stay within their sizes, and they tell no history."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DECISIONS = sorted((ROOT / "docs" / "decisions").glob("*.md"))
DOCUMENTS = ["README.md", *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").rglob("*.md")),
             "bench/README.md"]  # fmt: skip
# The README is the front door: what the service is, the two commands, what `up` starts, a map of docs/.
README_MAX_BYTES = 12_000
# A decision file gives its context, the decision and its consequences, briefly.
DECISION_MAX_BYTES = 2_500
DECISION_HEADINGS = ("## Context", "## Decision", "## Consequences")
# The two overviews stay readable in one sitting; what they point to holds the rest.
OVERVIEW_MAX_BYTES = {"docs/architecture.md": 12_000, "docs/operating.md": 12_000}
# Every tracked Markdown file together: the docs a newcomer reads in an evening.
MARKDOWN_MAX_BYTES = 150_000
# bench/README.md says how to run each benchmark and holds one table of current figures; their history is
# in git.
BENCH_README_MAX_BYTES = 20_000
# Words that tell how things came to be rather than what they are (docs/development.md).
HISTORY_WORDS = ("used to", "no longer", "previously", "first session", "moved to", "as before")
# The domain terms a newcomer meets, each defined in docs/glossary.md.
GLOSSARY_TERMS = ("pair", "grain", "slice", "tally", "class", "what", "run", "snapshot", "lease", "mark",
                  "sink", "ventilator", "rerun", "profile", "severity")  # fmt: skip
# `corpora/task_changes.py`, `config/api/requests.py`: a path of the tree ending in .py, not part of a longer one.
MODULE_PATH = re.compile(r"(?<![\w./-])((?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_]*\.py)\b")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_module_a_document_cites_exists(document):
    cited = set(MODULE_PATH.findall((ROOT / document).read_text()))
    assert sorted(path for path in cited if not (ROOT / path).is_file()) == []


def test_the_pattern_reads_the_modules_the_documents_cite():
    for document in ("docs/architecture.md", "docs/decisions/task-lifecycle.md", "bench/README.md"):
        assert MODULE_PATH.findall((ROOT / document).read_text()), f"{document}: the pattern does not read it"


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


def test_there_are_decisions_to_check():
    assert len(DECISIONS) >= 25


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda path: path.name)
def test_a_decision_gives_its_context_the_decision_and_its_consequences(decision):
    lines = decision.read_text().splitlines()
    found = [heading for heading in DECISION_HEADINGS if heading in lines]
    assert found == list(DECISION_HEADINGS), f"{decision.name}: has {found}, needs {list(DECISION_HEADINGS)}"
    positions = [lines.index(heading) for heading in DECISION_HEADINGS]
    assert positions == sorted(positions), f"{decision.name}: the headings are out of order"


@pytest.mark.parametrize("document", sorted(OVERVIEW_MAX_BYTES))
def test_an_overview_stays_short(document):
    size = (ROOT / document).stat().st_size
    assert size <= OVERVIEW_MAX_BYTES[document], f"{document}: {size:,} bytes, at most {OVERVIEW_MAX_BYTES[document]:,}"


def test_all_markdown_reads_in_an_evening():
    tracked = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=ROOT, capture_output=True, check=True)
    paths = [ROOT / name for name in tracked.stdout.decode().split("\0") if name]
    sizes = {path.relative_to(ROOT).as_posix(): path.stat().st_size for path in paths if path.is_file()}
    total = sum(sizes.values())
    largest = ", ".join(f"{name} {size:,}" for name, size in sorted(sizes.items(), key=lambda item: -item[1])[:8])
    assert total <= MARKDOWN_MAX_BYTES, (
        f"{total:,} bytes of Markdown in {len(sizes)} files, at most {MARKDOWN_MAX_BYTES:,}; largest: {largest}"
    )


def test_the_decisions_index_links_every_decision_and_only_those():
    linked = set(re.findall(r"\]\(decisions/([^)#]+\.md)\)", (ROOT / "docs" / "decisions.md").read_text()))
    assert sorted(path.name for path in DECISIONS if path.name not in linked) == []
    assert sorted(name for name in linked if not (ROOT / "docs" / "decisions" / name).is_file()) == []
    lines = re.findall(r"^- \[[^]]+\]\(decisions/[^)]+\.md\)", (ROOT / "docs" / "decisions.md").read_text(), re.M)
    assert len(lines) == len(DECISIONS), "docs/decisions.md: one line per decision file"


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda path: path.name)
def test_a_decision_stays_short(decision):
    size = decision.stat().st_size
    assert size <= DECISION_MAX_BYTES, f"{decision.name}: {size:,} bytes, at most {DECISION_MAX_BYTES:,}"


@pytest.mark.parametrize("decision", DECISIONS, ids=lambda path: path.name)
def test_a_decision_has_a_title_and_says_why(decision):
    text = decision.read_text()
    assert text.startswith("# ") and len(text.splitlines()) > 2


def test_every_citation_of_a_decision_names_its_file():
    """A citation names the decision's file (docs/decisions/rerun.md), never a section of the index."""
    offenders = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {".venv", ".git", "var", "static"} or not path.is_file():
            continue
        if path.suffix not in {".py", ".md", ".html", ".yaml", ".yml", ""} or path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{relative}: {cited}" for cited in re.findall(r"decisions\.md[,:]?\s+(?:#\s+)?\"[^\"]+\"", text)]
        for cited in re.findall(r"docs/decisions/([a-z0-9-]+\.md)", text):
            if not (ROOT / "docs" / "decisions" / cited).is_file():
                offenders.append(f"{relative}: {cited}")
    assert offenders == []


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_document_tells_what_is_not_how_it_came_to_be(document):
    text = " ".join((ROOT / document).read_text().lower().split())
    assert [word for word in HISTORY_WORDS if word in text] == []


def test_the_bench_readme_stays_a_guide_and_a_table():
    assert (ROOT / "bench" / "README.md").stat().st_size <= BENCH_README_MAX_BYTES


def test_every_benchmark_script_has_a_way_to_run_it():
    text = (ROOT / "bench" / "README.md").read_text()
    scripts = sorted(path.name for path in (ROOT / "bench").glob("bench_*.py"))
    assert [name for name in scripts if f"bench/{name}" not in text] == []


def test_the_glossary_defines_each_term():
    text = (ROOT / "docs" / "glossary.md").read_text()
    defined = {match.lower() for match in re.findall(r"^\*\*([^*]+)\*\*", text, flags=re.MULTILINE)}
    assert [term for term in GLOSSARY_TERMS if not any(term in entry.split(", ") for entry in defined)] == []
