"""The Celery application: Redis broker, tasks discovered in every app's tasks.py."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from config.logs import RequestIdFilter, RoutineFilter, TokenMaskingFormatter
from config.logsink import RedisLogHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("ccs")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def mask_tokens_in_worker_logs(logger: logging.Logger, *args: Any, **kwargs: Any) -> None:
    """Celery sets up its own log handlers in workers and beat; their lines mask tokens like every other,
    and leave Celery's routine lines out of the terminal (config.logs.RoutineFilter)."""
    for handler in logger.handlers:
        if not isinstance(handler.formatter, TokenMaskingFormatter):
            handler.setFormatter(TokenMaskingFormatter(handler.formatter or logging.Formatter()))
        if not isinstance(handler, RedisLogHandler) and not any(isinstance(f, RoutineFilter) for f in handler.filters):
            handler.addFilter(RoutineFilter())
    if logger is logging.getLogger() and not any(isinstance(h, RedisLogHandler) for h in logger.handlers):
        from django.conf import settings

        store = RedisLogHandler(url=settings.REDIS_URL)  # Celery replaced LOGGING's handlers: keep the stream
        store.addFilter(RequestIdFilter())
        logger.addHandler(store)
