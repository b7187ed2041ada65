"""Content negotiation of the API's file answers (downloads and exports)."""

from __future__ import annotations

from typing import Any

from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class FileNegotiation(BaseContentNegotiation):
    """A file answers in its own type (the export: the one its `format` parameter names) whatever Accept
    says, and its errors in problem+json as everywhere; DRF's own negotiation would take ?format= for a
    renderer's name, and refuse a browser that does not accept JSON."""

    def select_parser(self, request: Request, parsers: list[Any]) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: list[BaseRenderer], format_suffix: str | None = None) -> Any:
        return renderers[0], renderers[0].media_type
