"""The task lifecycle has one home: a source scan of the product code (not tests, migrations or bench).
Only `corpora/lifecycle.py` changes tasks and their messages, and only the task statuses' vocabulary
(`conversion/choices.py`) and what the apps derive from it (`corpora/statuses.py`) spell a task status as a
number."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import PROJECT_DIR

LIFECYCLE = Path("corpora/lifecycle.py")
STATUS_MODULES = {Path("conversion/choices.py"), Path("corpora/statuses.py")}

# A statement that writes the task table or a message table, or such a table's name given on its own (a
# loop over tables) other than as a model's own table name.
_TABLES = r"(?:corpora_task|reports_taskmessages|reports_taskclass|reports_messagetally|reports_messageclass)"
_WRITES = re.compile(
    rf"\b(?:UPDATE|DELETE\s+FROM|INSERT\s+INTO|COPY)\s+{_TABLES}\b|(?<!db_table = )[\"']{_TABLES}[\"']",
    re.IGNORECASE,
)
# A status compared with or set to a number (Python or SQL), a count bucket named by number, a number
# chosen in SQL (upper case, as all our SQL is), or a small negative number in a tuple, dict or call
# (a status list or a result status).
_STATUS_LITERALS = re.compile(
    r"\b(?:task_)?status(?:__\w+)?\s*(?:==|!=|<=|>=|<>|=|<|>)\s*-?[0-9]\b"
    r"|\bbucket\s*(?:IN\s*\(|==|=)\s*-?[0-9]\b"
    r"|\b(?:THEN|ELSE)\s+-?[0-9]\b"
    r"|[({,]\s*-[1-6]\s*[,:)]"
)


def product_modules(root: Path) -> list[Path]:
    """Every Python module of the product under `root`, relative to it."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        top = relative.parts[0]
        if top in {"tests", "bench", ".venv", "var", "node_modules"} or "migrations" in relative.parts:
            continue
        found.append(relative)
    return found


def offenders(root: Path, pattern: re.Pattern[str], allowed: set[Path]) -> list[str]:
    return [
        f"{relative}:{number}: {line.strip()}"
        for relative in product_modules(root)
        if relative not in allowed
        for number, line in enumerate((root / relative).read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_the_scan_sees_the_product_modules():
    modules = product_modules(PROJECT_DIR)
    assert LIFECYCLE in modules and Path("dispatcher/server.py") in modules
    assert not any(path.parts[0] == "tests" or "migrations" in path.parts for path in modules)


def test_only_the_lifecycle_module_writes_tasks_and_their_messages():
    assert offenders(PROJECT_DIR, _WRITES, {LIFECYCLE}) == []
    assert len(offenders(PROJECT_DIR, _WRITES, set())) >= 10  # the lifecycle module's own statements


def test_no_module_but_the_status_modules_spells_a_status_number():
    assert offenders(PROJECT_DIR, _STATUS_LITERALS, STATUS_MODULES) == []


def test_the_write_pattern_finds_writes_of_every_message_table():
    for spelled in [
        "COPY reports_taskmessages (task_id) FROM STDIN",
        "DELETE FROM reports_taskclass p WHERE",
        "INSERT INTO reports_messagetally (corpus_id)",
        "INSERT INTO reports_messageclass (level)",
        'for table in ("reports_taskclass", "corpora_task"):',
    ]:
        assert _WRITES.search(spelled), spelled
    for fine in ['db_table = "reports_taskmessages"', "SELECT x.details FROM reports_taskmessages x"]:
        assert not _WRITES.search(fine), fine


def test_the_status_pattern_finds_the_spellings_it_forbids():
    for spelled in [
        "WHERE status >= 0",
        "i.status <> -5",
        "condition=models.Q(status=0)",
        "if status == -4:",
        "SET status = CASE WHEN attempts >= %s THEN -4 ELSE 0 END",
        '"no_problem": ((-1,), "info"),',
        "STATUS_NAMES = {-1: 'no_problem'}",
        "return Decoded(-5, [message], None, None)",
        "WHERE bucket IN (0, 1) AND count > 0",
    ]:
        assert _STATUS_LITERALS.search(spelled), spelled
    for fine in ["response.status_code == 404", "status=http_status", "trail[-1]", "status=200"]:
        assert not _STATUS_LITERALS.search(fine), fine
