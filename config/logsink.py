"""Every Django process's log records (INFO and above), also kept in a capped Redis stream for
GET /api/logs and the /logs screen. Never blocks nor raises: short timeouts, and a record that cannot be
written is dropped and counted. Celery's routine lines (beat sending its periodic tasks, a task received or
succeeded: the job runner logs each job's outcome itself) are kept at DEBUG, below the screen's default."""

from __future__ import annotations

import logging
import os
import sys
import threading
from datetime import UTC, datetime

import redis
from redis.typing import EncodableT, FieldT

from config.logs import mask_tokens, routine
from config.redis_client import redis_client

STREAM = "ccs:logs"
LOG_KEEP = 10000  # records kept (approximately: XADD MAXLEN ~)
PROCESS_ENV = "CCS_PROCESS"  # the role `up` gives each child (web, dispatcher, ...)
SOCKET_SECONDS = 0.2
RETRY_SECONDS = 5.0  # after a failure, records are dropped for this long before trying again

_guard = threading.local()


def stream_level(levelno: int, levelname: str, logger: str, message: str) -> tuple[int, str]:
    """The level a record is kept (and read) at: its own, or DEBUG for a routine line."""
    if levelno == logging.INFO and routine(logger, message):
        return logging.DEBUG, logging.getLevelName(logging.DEBUG)
    return levelno, levelname


def process_name() -> str:
    """The process's role: what `up` set in CCS_PROCESS, else the management command, else the program."""
    if os.environ.get(PROCESS_ENV):
        return os.environ[PROCESS_ENV]
    argv = sys.argv or ["python"]
    if os.path.basename(argv[0]) == "manage.py" and len(argv) > 1:
        return argv[1]
    return os.path.basename(argv[0]) or "python"


class RedisLogHandler(logging.Handler):
    """Appends each record to the Redis stream STREAM (one XADD, capped at LOG_KEEP), in the Redis of `url`,
    or else of settings.REDIS_URL as it is at each record (a new client when it changed)."""

    def __init__(self, url: str | None = None, level: int = logging.INFO) -> None:
        super().__init__(level)
        self.url = url
        self.dropped = 0
        self._client: redis.Redis | None = None
        self._client_url: str | None = None
        self._down_until = 0.0
        self._formatter = logging.Formatter()
        self._process = process_name()

    def _target(self) -> str:
        if self.url is not None:
            return self.url
        from django.conf import settings

        return settings.REDIS_URL

    def _redis(self, url: str) -> redis.Redis:
        if self._client is None or url != self._client_url:
            self._down_until = 0.0  # the retry window was the old URL's
            self._client, self._client_url = (
                redis_client(
                    url, socket_timeout=SOCKET_SECONDS, socket_connect_timeout=SOCKET_SECONDS, retry_on_timeout=False
                ),
                url,
            )
        return self._client

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(_guard, "busy", False):  # a record logged while writing one (redis's own logging)
            return
        now = record.created
        url = self._target()
        if now < self._down_until and url == self._client_url:  # a new URL is tried at once
            self.dropped += 1
            return
        _guard.busy = True
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + self._formatter.formatException(record.exc_info)
            levelno, levelname = stream_level(record.levelno, record.levelname, record.name, message)
            fields: dict[FieldT, EncodableT] = {
                "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
                "level": levelname,
                "levelno": str(levelno),
                "logger": record.name,
                "process": self._process,
                "pid": str(record.process or os.getpid()),
                "request_id": str(getattr(record, "request_id", "-")),
                "message": mask_tokens(message)[:8000],
            }
            self._redis(url).xadd(STREAM, fields, maxlen=LOG_KEEP, approximate=True)
        except Exception:
            self.dropped += 1
            self._down_until = now + RETRY_SECONDS
        finally:
            _guard.busy = False
