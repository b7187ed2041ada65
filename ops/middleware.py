"""Keeps this web process's live configuration (config.live.get_config) in step with the configuration overrides
(checked every few seconds)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from config.live import config_refresh

logger = logging.getLogger(__name__)
# These read no setting and are built without the database (the OpenAPI document is loaded before tests run).
NO_SYNC_PREFIXES = ("/api/openapi.json", "/api/docs", "/static/")


class ConfigSyncMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(NO_SYNC_PREFIXES):
            return self.get_response(request)
        try:
            config_refresh()
        except Exception as exc:  # the database is away: the request answers on (the health check reports it)
            logger.warning("could not read the configuration overrides: %s", type(exc).__name__)
        return self.get_response(request)
