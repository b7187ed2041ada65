"""The line-by-line reading of a LaTeXML log that conversion.logparse.parse_log reads in one regex pass:
the rules written out one line at a time, so a test can hold the two to the same answers on any log."""

from __future__ import annotations

import re

from conversion.choices import Category, Severity, task_status_of
from conversion.logparse import (
    CATEGORY_MAX,
    DETAILS_MAX,
    MEASURES,
    WHAT_MAX,
    Message,
    ParsedLog,
    _as_text,
    _loaded_files,
)
from conversion.logparse import _status_code as status_code_read

_MESSAGE_LINE = re.compile(r"^([^ :]+):([^ :]+):([^ ]+)(\s(.*))?$")
_SEVERITIES = {**{severity: severity for severity in Severity}, "warn": Severity.WARNING}
_SMALL_INT = re.compile(r"[0-9]{1,18}")


def parse_log_by_line(data: bytes | str) -> ParsedLog:
    """Parse a LaTeXML log; any content is accepted, and a log without a status line is fatal."""
    text = _as_text(data)
    messages: list[Message] = []
    measures: dict[str, int] = {}
    status_lines: list[str] = []
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
                status_lines.append(line)  # read below by _status_code, the one reading of status lines
                continue
            severity = _SEVERITIES.get(first_lower)
            if severity is None:
                continue  # e.g. "http://host:80/x" or "Scan:x:y": text, not a message
            if severity == Severity.INFO and category_lower in MEASURES and _SMALL_INT.fullmatch(what):
                measures[category_lower] = int(what)
                continue
            if severity == Severity.FATAL and category_lower == Category.INVALID:
                invalid = True
            open_message = [severity, category[:CATEGORY_MAX], what[:WHAT_MAX], details[:DETAILS_MAX]]
            continue

        messages.extend(_loaded_files(line))

    if open_message is not None:
        messages.append(Message(*open_message))
    # Only the lines that may be status lines go through the pattern, not the whole log again; with the
    # CR that was taken off their end given back, so the pattern sees them as they are in the log.
    end = "\r\n" if "\r" in text else "\n"
    status_code = status_code_read(end.join(status_lines) + end) if status_lines else None
    status = task_status_of(status_code, invalid=invalid)
    return ParsedLog(status, status_code, messages, *(measures.get(name) for name in MEASURES))
