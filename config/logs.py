"""One log line per event: time, level, logger, request id, message (see docs/decisions/logs-and-metrics.md)."""

from __future__ import annotations

import contextvars
import logging
import re
from datetime import UTC, datetime

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

# A `token=` parameter (also URL-encoded inside another parameter, e.g. next=/x%3Ftoken%3D...), and any
# string shaped like one of our tokens wherever it appears (a header echoed in an error, a traceback).
_TOKEN_PARAMETER = re.compile(r"(?i)(token(?:=|%3D))[^&\s\"'#]+")
_TOKEN_SHAPE = re.compile(r"\bccs_[A-Za-z0-9_-]{16,}")
MASK = "***"

# Celery's routine INFO lines, by logger: (logger, the start of the message). The log stream keeps them at
# DEBUG (config.logsink) and the terminal leaves them out (RoutineFilter): the job runner logs each job's end.
ROUTINE = (
    ("celery.beat", re.compile(r"Scheduler: Sending due task ")),
    ("django_celery_beat.schedulers", re.compile(r"DatabaseScheduler: Schedule changed\.")),
    ("celery.worker.strategy", re.compile(r"Task \S+\[[^\]]*\] received")),
    ("celery.app.trace", re.compile(r"Task \S+\[[^\]]*\] succeeded in ")),
)


def routine(logger: str, message: str) -> bool:
    """Whether an INFO record is one of Celery's routine lines."""
    return any(logger == name and pattern.match(message) for name, pattern in ROUTINE)


def mask_tokens(text: str) -> str:
    """The text with every service token replaced by ***: no log line may carry a usable token."""
    if "oken" not in text and "OKEN" not in text and "ccs_" not in text:  # the common case, cheaply
        return text
    return _TOKEN_SHAPE.sub("ccs_" + MASK, _TOKEN_PARAMETER.sub(r"\g<1>" + MASK, text))


class TokenMaskingFormatter(logging.Formatter):
    """Wraps another formatter and masks tokens in what it writes, tracebacks included (used for
    gunicorn's access and error logs, which do not go through Django's LOGGING)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return mask_tokens(self.inner.format(record))


class RequestIdFilter(logging.Filter):
    """Stamp every record with the id of the request (or job) it was written for."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class LineFormatter(logging.Formatter):
    """`2026-11-22T15:47:23.123Z INFO jobs.runner req=4f2c… message` with tracebacks indented and
    service tokens masked."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        request_id = getattr(record, "request_id", "-")
        line = f"{stamp} {record.levelname} {record.name} req={request_id} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + "\n".join("    " + row for row in self.formatException(record.exc_info).splitlines())
        return mask_tokens(line)


class RoutineFilter(logging.Filter):
    """Leaves Celery's routine INFO lines (ROUTINE) out of a terminal's handler, unless LOG_LEVEL is DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
            return True
        return not routine(record.name, record.getMessage())
