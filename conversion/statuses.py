"""Task status codes (CorTeX's) and LaTeXML's status codes, without Django.

The worker side (the log parser, the engine) needs them on machines without Django, so they are
defined here; `corpora.statuses` re-exports them with the names, buckets and SQL predicates the
Django apps use. Nothing else spells a status number.
"""

from __future__ import annotations

# Task statuses: 0 TODO, > 0 a lease mark, -1..-5 completed, <= -6 blocked (pause writes BLOCKED).
TODO = 0
NO_PROBLEM = -1
WARNING = -2
ERROR = -3
FATAL = -4
INVALID = -5
BLOCKED = -6

COMPLETED_NAMES: dict[int, str] = {
    NO_PROBLEM: "no_problem",
    WARNING: "warning",
    ERROR: "error",
    FATAL: "fatal",
    INVALID: "invalid",
}

# LaTeXML's own status codes (`Status:conversion:N`); code c is task status -(c + 1).
LATEXML_NO_PROBLEM = 0
LATEXML_FATAL = 3
LATEXML_NAMES: dict[int, str] = {
    code: COMPLETED_NAMES[-(code + 1)] for code in range(LATEXML_NO_PROBLEM, LATEXML_FATAL + 1)
}


def completed_status_name(status: int) -> str:
    """The name of a completed task status: -1..-5 -> no_problem, warning, error, fatal, invalid."""
    try:
        return COMPLETED_NAMES[status]
    except KeyError:
        raise ValueError(f"{status!r} is not a completed task status ({INVALID}..{NO_PROBLEM})") from None


def task_status_of(status_code: int | None, *, invalid: bool = False) -> int:
    """The completed task status of a log with LaTeXML status code `status_code` (None: no status line)."""
    if invalid:
        return INVALID
    if status_code is None or not LATEXML_NO_PROBLEM <= status_code <= LATEXML_FATAL:
        # No status line means LaTeXML never finished; a code outside 0..3 must not become a
        # non-terminal task status (-(7+1) would read as "blocked").
        return FATAL
    return -(status_code + 1)
