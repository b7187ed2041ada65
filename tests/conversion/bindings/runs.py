"""Conversions of a binding's fixture through the worker's own path (conversion.worker.convert_task: the
sandbox, every limit), under the `arxiv` preset (or another) with the shipped bindings and without them,
so that a test shows what a binding changes."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from conversion import profiles
from conversion.archive import pack_entry
from conversion.choices import COMPLETED_NAMES
from conversion.logparse import parse_log
from conversion.worker import convert_task

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "bindings"


@dataclass(frozen=True)
class Outcome:
    status: str  # no_problem, warning, error or fatal
    html: str
    messages: tuple[tuple[str, str, str, str], ...]  # (severity, category, what, details)

    def problems(self) -> list[tuple[str, str, str, str]]:
        """The error and fatal messages."""
        return [message for message in self.messages if message[0] in ("error", "fatal")]

    def missing(self) -> set[str]:
        """What the log says is not installed: the `what` of each missing_file message."""
        return {what for _severity, category, what, _details in self.messages if category == "missing_file"}


def convert(fixture: str, *, bindings: bool = True, timeout: float = 120, preset: str = "arxiv") -> Outcome:
    """The fixture directory tests/fixtures/bindings/<fixture> (its one main .tex and what it reads)
    converted under a preset (`arxiv` unless named: its nobibtex reads a shipped .bbl only; `default`
    lets LaTeXML read .bib files itself), with the shipped bindings or without them."""
    profile = profiles.with_shipped_bindings(profiles.PRESETS[preset].profile, bindings)
    how = profiles.invocation(profile, roots=[], timeout=timeout, memory_mb=2048)
    payload = pack_entry(FIXTURES / fixture, "dir", fixture)
    converted = convert_task(
        payload, timeout=how.timeout, memory_mb=how.memory_mb, latexmlc=how.executable, extra_args=how.options,
        read_only=how.read_only,
    )  # fmt: skip
    with zipfile.ZipFile(BytesIO(converted.result)) as archive:
        names = archive.namelist()
        parsed = parse_log(archive.read("cortex.log"))
        html = next((archive.read(name).decode() for name in names if name.endswith(".html")), "")
    messages = tuple((m.severity, m.category, m.what, m.details) for m in parsed.messages)
    return Outcome(COMPLETED_NAMES.get(parsed.status, "fatal"), html, messages)
