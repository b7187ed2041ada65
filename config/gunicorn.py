"""gunicorn's logger with service tokens masked: its access log writes each request line, query string
included, and `?token=` is a documented way to send a token. `up` passes it as --logger-class."""

from __future__ import annotations

import logging

from gunicorn.config import Config
from gunicorn.glogging import Logger

from config.logs import TokenMaskingFormatter


class TokenMaskingLogger(Logger):
    """gunicorn's own Logger, every access and error line (tracebacks too) passed through `mask_tokens`."""

    def setup(self, cfg: Config) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if not isinstance(handler.formatter, TokenMaskingFormatter):
                    handler.setFormatter(TokenMaskingFormatter(handler.formatter or logging.Formatter()))
