"""Read a LaTeXML `cortex.log` into a task status, its messages and its runtime.

Pure library (standard library only). Logs come from untrusted documents and dying processes, so
`parse_log` accepts any bytes at all and never raises on their content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from conversion.choices import Category, Severity, task_status_of

CATEGORY_MAX = 100
WHAT_MAX = 200
DETAILS_MAX = 2000

# Severity names as LaTeXML writes them, and in lower case; any other case is lowered first. The values are
# plain strings (a Severity's value), as the parsed messages carry them.
_SEVERITIES = {
    **{name: severity.value for severity in Severity for name in (severity.value, severity.value.capitalize())},
    "warn": Severity.WARNING.value,
    "Warn": Severity.WARNING.value,
}
# LaTeXML opens every progress note with "(Stage..." on a fresh line and closes it with " 0.01 sec)";
# only file loads are worth keeping. Searched anywhere in the line so a note that some other
# writer put after text on the same line is still found.
_LOADING_MARKS = ("(Loading ", "(Processing definitions ")
_LOADING = re.compile("|".join(map(re.escape, _LOADING_MARKS)))
# Loads that LaTeXML names with a word before the path ("(Loading compiled schema /x/LaTeXML.model...").
_LOADING_PREFIXES = ("compiled schema ", "RelaxNG schema from ", "RelaxNG ", "DTD ")
# Bounded so int() never sees a huge digit string (Python refuses over 4300 digits with ValueError).
_SMALL_INT = re.compile(r"[0-9]{1,18}")
# LaTeXML's status line, exactly as the message rule in parse_log reads a line "Status:conversion:N [details]"
# (both names in any case, N a small number); a trailing CR belongs to a CRLF line end.
_STATUS_LINE = re.compile(r"^status:conversion:([0-9]{1,18})(?: [^\n]*)?\r?$", re.MULTILINE | re.IGNORECASE | re.ASCII)


class Message(NamedTuple):
    """One log message as stored: severity is a `Severity`'s value; fields are capped.
    (A named tuple: the dispatcher makes millions of them, and a tuple is made in a third of the time.)"""

    severity: str
    category: str
    what: str
    details: str


# The measures the engine appends as `Info:<name>:N` lines (conversion.engine.finish_log): read into
# ParsedLog's field of the same name, not kept as messages.
MEASURES = ("runtime_ms", "cpu_ms", "peak_rss_kb")


@dataclass(frozen=True)
class ParsedLog:
    """What a log says: task status (-1..-5), LaTeXML's status code, messages in log order, and the
    engine's measures (MEASURES): runtime, CPU time of all its processes, peak resident size."""

    status: int
    status_code: int | None
    messages: list[Message]
    runtime_ms: int | None
    cpu_ms: int | None = None
    peak_rss_kb: int | None = None


def status_code_of(log: bytes | str) -> int | None:
    """LaTeXML's status code of a log: the most severe of its `Status:conversion:N` lines, None without one.

    LaTeXML writes one status line per run, at its end. A log with several holds more than one run or an
    appended verdict (the worker adds `Status:conversion:3` when it kills a conversion), and every message
    of every part is kept and reported, so the status is the worst of them: appending never makes a task
    look better than a message in its log (docs/decisions/output-checks.md)."""
    return _status_code(_as_text(log))


def _status_code(text: str) -> int | None:
    codes = _STATUS_LINE.findall(text)
    return max(int(code) for code in codes) if codes else None


def parse_log(data: bytes | str) -> ParsedLog:
    """Parse a LaTeXML log; any content is accepted, and a log without a status line is fatal."""
    text = _as_text(data)
    crlf = "\r" in text
    if crlf:  # one CR before each line end belongs to a CRLF line end, as at the end of the last line
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    messages: list[Message] = []
    measures: dict[str, int] = {}
    status_lines: list[str] = []
    invalid = False
    # The message that TAB lines extend, as its fields; None when the line before was not a message.
    open_message: list[str] | None = None
    severities, info, fatal, new = _SEVERITIES, Severity.INFO.value, Severity.FATAL.value, tuple.__new__
    loading, definitions = _LOADING_MARKS  # looked for with `in` before the pattern splits a line

    for line in text.split("\n"):
        if line[:1] == "\t":
            if open_message is not None and len(open_message[3]) < DETAILS_MAX:
                more = line[1:]
                open_message[3] = (open_message[3] + "\n" + more if open_message[3] else more)[:DETAILS_MAX]
            continue
        if open_message is not None:
            messages.append(new(Message, open_message))
            open_message = None
        if not line:
            continue
        # The message rule, "^([^ :]+):([^ :]+):([^ ]+)(\s(.*))?$", read with str methods: the first two
        # fields run to the first two colons, the third to the first space, and the details after it.
        fields = line.split(":", 2)
        if len(fields) == 3:
            first, category, rest = fields
            what, _, details = rest.partition(" ")
            if what and category and first and " " not in category and " " not in first:
                severity = severities.get(first)
                if severity is None:
                    first_lower = first.lower()
                    if first_lower == "status":
                        status_lines.append(line)  # read below by _status_code, the one reading of status lines
                        continue
                    severity = severities.get(first_lower)
                    if severity is None:
                        continue  # e.g. "http://host:80/x" or "Scan:x:y": text, not a message
                if severity == info and category.lower() in MEASURES and _SMALL_INT.fullmatch(what):
                    measures[category.lower()] = int(what)
                    continue
                if severity == fatal and category.lower() == Category.INVALID:
                    invalid = True
                open_message = [severity, category[:CATEGORY_MAX], what[:WHAT_MAX], details[:DETAILS_MAX]]
                continue
        if loading in line or definitions in line:
            messages.extend(_loaded_files(line))

    if open_message is not None:
        messages.append(new(Message, open_message))
    # Only the lines that may be status lines go through the pattern, not the whole log again; with the
    # CR that was taken off their end given back, so the pattern sees them as they are in the log.
    end = "\r\n" if crlf else "\n"
    status_code = _status_code(end.join(status_lines) + end) if status_lines else None
    status = task_status_of(status_code, invalid=invalid)
    return ParsedLog(
        status=status,
        status_code=status_code,
        messages=messages,
        runtime_ms=measures.get("runtime_ms"),
        cpu_ms=measures.get("cpu_ms"),
        peak_rss_kb=measures.get("peak_rss_kb"),
    )


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
            found.append(Message(severity=Severity.INFO, category="loaded_file", what=path[:WHAT_MAX], details=""))
    return found
