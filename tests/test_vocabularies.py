"""Every vocabulary is an enum in its package's `choices.py` (docs/decisions/vocabularies.md): a source scan
of the product code (not tests, migrations or bench) for enum and Django choices classes defined elsewhere, and
for the conversion library's vocabularies being plain `enum` classes, never Django's."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import PROJECT_DIR

_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "Choices", "TextChoices", "IntegerChoices"}


def _product_modules() -> list[Path]:
    found = []
    for path in sorted(PROJECT_DIR.rglob("*.py")):
        relative = path.relative_to(PROJECT_DIR)
        if relative.parts[0] in {"tests", "bench", ".venv", "var", "node_modules"} or "migrations" in relative.parts:
            continue
        found.append(relative)
    return found


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def vocabularies(source: str) -> list[tuple[int, str]]:
    """(line, name) of each enum or choices class the source defines, by a class statement or by a call."""
    found = []
    enums = set(_ENUM_BASES)  # and the enum classes the source defines, which others may extend
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and any(_base_name(base) in enums for base in node.bases):
            found.append((node.lineno, node.name))
            enums.add(node.name)
        elif isinstance(node, ast.Call) and _base_name(node.func) in _ENUM_BASES:
            found.append((node.lineno, ast.unparse(node.args[0]) if node.args else "?"))
    return found


def test_every_vocabulary_is_defined_in_a_choices_module():
    offenders = [
        f"{relative}:{line}: {name}"
        for relative in _product_modules()
        if relative.name != "choices.py"
        for line, name in vocabularies((PROJECT_DIR / relative).read_text())
    ]
    assert offenders == []


def test_the_choices_modules_hold_the_vocabularies():
    defined = {
        relative.parent.as_posix(): {name for _, name in vocabularies((PROJECT_DIR / relative).read_text())}
        for relative in _product_modules()
        if relative.name == "choices.py"
    }
    assert {"TaskStatus", "Severity", "KillReason"} <= defined["conversion"]
    assert {"JobState", "JobKinds"} <= defined["jobs"]
    assert {"CorpusState", "'MessageSeverity'"} <= defined["corpora"]
    assert {"Action", "HealthStatus"} <= defined["accounts"] | defined["ops"]


def test_the_conversion_library_uses_plain_enums():
    tree = ast.parse((PROJECT_DIR / "conversion" / "choices.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"__future__", "enum"}
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    own = {node.name for node in classes}  # a plain enum of the module that others extend (its `key`)
    bases = {_base_name(base) for node in classes for base in node.bases}
    assert bases - own == {"IntEnum", "StrEnum"}
    extended = [node for node in classes if node.name in bases]
    assert all(_base_name(base) in {"IntEnum", "StrEnum"} for node in extended for base in node.bases)


def test_the_scan_finds_the_definitions_it_forbids():
    for spelled in [
        "class State(models.TextChoices):\n    A = 'a'",
        "class Level(IntegerChoices):\n    A = 1",
        "class Kind(enum.StrEnum):\n    A = 'a'",
        "class Code(IntEnum):\n    A = 1",
        "Severity = models.TextChoices('Severity', 'A B')",
    ]:
        assert vocabularies(spelled), spelled
    for fine in ["class Page:\n    size = 1", "class Form(forms.Form):\n    pass", "choices = State.choices"]:
        assert not vocabularies(fine), fine
