"""Read a LaTeXML `cortex.log` into a task status, its messages and its runtime (DESIGN section 7).

Pure library (standard library only). Logs come from untrusted documents and dying processes, so
`parse_log` accepts any bytes at all and never raises on their content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

NO_PROBLEM = -1
WARNING = -2
ERROR = -3
FATAL = -4
INVALID = -5

_STATUS_NAMES = {NO_PROBLEM: "no_problem", WARNING: "warning", ERROR: "error", FATAL: "fatal", INVALID: "invalid"}

CATEGORY_MAX = 100
WHAT_MAX = 200
DETAILS_MAX = 2000

_MESSAGE_LINE = re.compile(r"^([^ :]+):([^ :]+):([^ ]+)(\s(.*))?$")
_SEVERITIES = {"warning": "warning", "warn": "warning", "error": "error", "fatal": "fatal", "info": "info"}
# LaTeXML opens every progress note with "(Stage..." on a fresh line and closes it with " 0.01 sec)";
# only file loads are worth keeping. Searched anywhere in the line so a note that some other
# writer put after text on the same line is still found.
_LOADING = re.compile(r"\((?:Loading|Processing definitions) ")
# Loads that LaTeXML names with a word before the path ("(Loading compiled schema /x/LaTeXML.model...").
_LOADING_PREFIXES = ("compiled schema ", "RelaxNG schema from ", "RelaxNG ", "DTD ")
# Bounded so int() never sees a huge digit string (Python refuses over 4300 digits with ValueError).
_SMALL_INT = re.compile(r"[0-9]{1,18}")


class Message(NamedTuple):
    """One log message as stored: severity is "info", "warning", "error" or "fatal"; fields are capped.
    (A named tuple: the dispatcher makes millions of them, and a tuple is made in a third of the time.)"""

    severity: str
    category: str
    what: str
    details: str


@dataclass(frozen=True)
class ParsedLog:
    """What a log says: task status (-1..-5), LaTeXML's status code, messages in log order, runtime."""

    status: int
    status_code: int | None
    messages: list[Message]
    runtime_ms: int | None


def status_name(status: int) -> str:
    """The name of a completed task status: -1..-5 -> no_problem, warning, error, fatal, invalid."""
    try:
        return _STATUS_NAMES[status]
    except KeyError:
        raise ValueError(f"{status!r} is not a completed task status (-1..-5)") from None


def parse_log(data: bytes | str) -> ParsedLog:
    """Parse a LaTeXML log; any content is accepted, and a log without a status line is fatal."""
    text = _as_text(data)
    messages: list[Message] = []
    status_code: int | None = None
    runtime_ms: int | None = None
    invalid = False
    # The message that TAB lines extend, as mutable parts; None when the previous line was not a message.
    open_message: list[str] | None = None

    lines = text.split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    for line in lines:
        if line.startswith("\t"):
            if open_message is not None and len(open_message[3]) < DETAILS_MAX:
                more = line[1:]
                open_message[3] = (open_message[3] + "\n" + more if open_message[3] else more)[:DETAILS_MAX]
            continue
        if open_message is not None:
            messages.append(Message(*open_message))
            open_message = None
        if not line:
            continue

        match = _MESSAGE_LINE.match(line)
        if match:
            first, category, what, _, details = match.groups("")
            first_lower, category_lower = first.lower(), category.lower()
            if first_lower == "status":
                if category_lower == "conversion" and _SMALL_INT.fullmatch(what):
                    # Several status lines (a worker appends one after a kill): the most severe counts.
                    code = int(what)
                    status_code = code if status_code is None else max(status_code, code)
                continue
            severity = _SEVERITIES.get(first_lower)
            if severity is None:
                continue  # e.g. "http://host:80/x" or "Scan:x:y": text, not a message
            if severity == "info" and category_lower == "runtime_ms" and _SMALL_INT.fullmatch(what):
                runtime_ms = int(what)
                continue
            if severity == "fatal" and category_lower == "invalid":
                invalid = True
            open_message = [severity, category[:CATEGORY_MAX], what[:WHAT_MAX], details[:DETAILS_MAX]]
            continue

        messages.extend(_loaded_files(line))

    if open_message is not None:
        messages.append(Message(*open_message))
    status = _task_status(status_code, invalid)
    return ParsedLog(status=status, status_code=status_code, messages=messages, runtime_ms=runtime_ms)


def _as_text(data: bytes | str | bytearray | memoryview) -> str:
    if isinstance(data, str):
        # A str may carry lone surrogates (from surrogateescape); PostgreSQL cannot store them.
        text = data.encode("utf-8", errors="replace").decode("utf-8")
    elif isinstance(data, bytes | bytearray | memoryview):
        text = bytes(data).decode("utf-8", errors="replace")
    else:
        raise TypeError(f"parse_log takes bytes or str, not {type(data).__name__}")
    # PostgreSQL text columns refuse NUL; a leading BOM would hide the first line's severity.
    return text.replace("\x00", "").removeprefix("\ufeff")


def _loaded_files(line: str) -> list[Message]:
    """The `loaded_file` info messages of a progress line: the path of each "(Loading p..." in it."""
    found = []
    # Each piece after a "(Loading " runs up to the next one or the end of the line.
    for segment in _LOADING.split(line)[1:]:
        # The path runs up to LaTeXML's "..."; what follows is timing (" 0.01 sec) 0.17 sec)").
        dots = segment.find("...")
        if dots <= 0:
            continue  # a line cut off mid-path by a dying process names no usable file
        path = segment[:dots]
        for prefix in _LOADING_PREFIXES:
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        path = path.strip()
        if path:
            found.append(Message(severity="info", category="loaded_file", what=path[:WHAT_MAX], details=""))
    return found


def _task_status(status_code: int | None, invalid: bool) -> int:
    if invalid:
        return INVALID
    if status_code is None or not 0 <= status_code <= 3:
        # No status line means LaTeXML never finished; a code outside 0..3 must not become a
        # non-terminal task status (-(7+1) would read as "blocked").
        return FATAL
    return -(status_code + 1)
