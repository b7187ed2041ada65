"""One log line per event: time, level, logger, request id, message (see docs/decisions.md)."""

from __future__ import annotations

import contextvars
import logging
from datetime import UTC, datetime

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class RequestIdFilter(logging.Filter):
    """Stamp every record with the id of the request (or job) it was written for."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class LineFormatter(logging.Formatter):
    """`2026-11-22T15:47:23.123Z INFO jobs.runner req=4f2c… message` with tracebacks indented."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        request_id = getattr(record, "request_id", "-")
        line = f"{stamp} {record.levelname} {record.name} req={request_id} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + "\n".join("    " + row for row in self.formatException(record.exc_info).splitlines())
        return line
