"""The task lifecycle has one home: a source scan of the product code (not tests, migrations or bench).
Only `corpora/task_changes.py` and the message store (`corpora/message_store.py`) change tasks and their
messages, and only the task statuses' vocabulary (`conversion/choices.py`) and what the apps derive from it
(`corpora/statuses.py`) spell a task status as a number."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import PROJECT_DIR

LIFECYCLE = {Path("corpora/task_changes.py"), Path("corpora/message_store.py")}
STATUS_MODULES = {Path("conversion/choices.py"), Path("corpora/statuses.py")}

# A statement that writes the task table or a message table, or such a table's name given on its own (a
# loop over tables) other than as a model's own table name; the statements name them by the constants
# built from the models (TASK_TABLE = Task._meta.db_table), and a literal name is caught too.
_TABLES = (
    r"(?:corpora_task|corpora_taskmessages|corpora_taskclass|corpora_messagetally|corpora_messageclass"
    r"|\{(?:TASK|TASK_MESSAGES|TASK_CLASS|MESSAGE_TALLY|MESSAGE_CLASS)_TABLE\})"
)
_WRITES = re.compile(
    rf"\b(?:UPDATE|DELETE\s+FROM|INSERT\s+INTO|COPY)\s+{_TABLES}(?!\w)|(?<!db_table = )[\"']{_TABLES}[\"']"
    r"|\b(?:TASK|TASK_MESSAGES|TASK_CLASS|MESSAGE_TALLY|MESSAGE_CLASS)_TABLE\b(?! = )[,)]",
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


def _import_lines(source: str) -> set[int]:
    """The lines of a module's import statements: importing a table's name (corpora/tables.py) writes nothing."""
    return {
        number
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for number in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def offenders(root: Path, pattern: re.Pattern[str], allowed: set[Path]) -> list[str]:
    found = []
    for relative in product_modules(root):
        if relative in allowed:
            continue
        source = (root / relative).read_text()
        imports = _import_lines(source)
        found += [
            f"{relative}:{number}: {line.strip()}"
            for number, line in enumerate(source.splitlines(), 1)
            if number not in imports and pattern.search(line)
        ]
    return found


def test_the_scan_sees_the_product_modules():
    modules = product_modules(PROJECT_DIR)
    assert set(modules) >= LIFECYCLE and Path("dispatcher/server.py") in modules
    assert not any(path.parts[0] == "tests" or "migrations" in path.parts for path in modules)


def test_only_the_lifecycle_module_writes_tasks_and_their_messages():
    assert offenders(PROJECT_DIR, _WRITES, LIFECYCLE) == []
    assert len(offenders(PROJECT_DIR, _WRITES, set())) >= 10  # the lifecycle module's own statements


def test_no_module_but_the_status_modules_spells_a_status_number():
    assert offenders(PROJECT_DIR, _STATUS_LITERALS, STATUS_MODULES) == []


def test_the_write_pattern_finds_writes_of_every_message_table():
    for spelled in [
        "COPY corpora_taskmessages (task_id) FROM STDIN",
        "DELETE FROM corpora_taskclass p WHERE",
        "INSERT INTO corpora_messagetally (corpus_id)",
        "INSERT INTO corpora_messageclass (level)",
        'for table in ("corpora_taskclass", "corpora_task"):',
        'f"UPDATE {TASK_TABLE} t SET status = 0"',
        'f" pairs AS (DELETE FROM {TASK_CLASS_TABLE} p WHERE"',
        'with cursor.cursor.copy(f"COPY {TASK_MESSAGES_TABLE} (task_id) FROM STDIN")',
        "for table in (TASK_CLASS_TABLE, MESSAGE_TALLY_TABLE):",
    ]:
        assert _WRITES.search(spelled), spelled
    for fine in [
        'db_table = "corpora_taskmessages"',
        "SELECT x.details FROM corpora_taskmessages x",
        'f"SELECT x.details FROM {TASK_MESSAGES_TABLE} x"',
        "TASK_TABLE = Task._meta.db_table",
    ]:
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
