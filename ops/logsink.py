"""Every Django process's log records (INFO and above), also kept in a capped Redis stream for
GET /api/logs and the /logs screen. Never blocks nor raises: short timeouts, and a record that cannot be
written is dropped and counted."""

from __future__ import annotations

import logging
import os
import sys
import threading
from datetime import UTC, datetime

import redis

from config.logs import mask_tokens
from config.redis_client import redis_client

STREAM = "ccs:logs"
LOG_KEEP = 10000  # records kept (approximately: XADD MAXLEN ~)
PROCESS_ENV = "CCS_PROCESS"  # the role `up` gives each child (web, dispatcher, ...)
SOCKET_SECONDS = 0.2
RETRY_SECONDS = 5.0  # after a failure, records are dropped for this long before trying again

_guard = threading.local()


def process_name() -> str:
    """The process's role: what `up` set in CCS_PROCESS, else the management command, else the program."""
    if os.environ.get(PROCESS_ENV):
        return os.environ[PROCESS_ENV]
    argv = sys.argv or ["python"]
    if os.path.basename(argv[0]) == "manage.py" and len(argv) > 1:
        return argv[1]
    return os.path.basename(argv[0]) or "python"


class RedisLogHandler(logging.Handler):
    """Appends each record to the Redis stream STREAM (one XADD, capped at LOG_KEEP)."""

    def __init__(self, url: str | None = None, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.url = url
        self.dropped = 0
        self._client: redis.Redis | None = None
        self._down_until = 0.0
        self._formatter = logging.Formatter()
        self._process = process_name()

    def _redis(self) -> redis.Redis:
        if self._client is None:
            self._client = redis_client(
                self.url, socket_timeout=SOCKET_SECONDS, socket_connect_timeout=SOCKET_SECONDS, retry_on_timeout=False
            )
        return self._client

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(_guard, "busy", False):  # a record logged while writing one (redis's own logging)
            return
        now = record.created
        if now < self._down_until:
            self.dropped += 1
            return
        _guard.busy = True
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + self._formatter.formatException(record.exc_info)
            fields = {
                "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
                "level": record.levelname,
                "levelno": str(record.levelno),
                "logger": record.name,
                "process": self._process,
                "pid": str(record.process or os.getpid()),
                "request_id": str(getattr(record, "request_id", "-")),
                "message": mask_tokens(message)[:8000],
            }
            self._redis().xadd(STREAM, fields, maxlen=LOG_KEEP, approximate=True)
        except Exception:
            self.dropped += 1
            self._down_until = now + RETRY_SECONDS
        finally:
            _guard.busy = False
