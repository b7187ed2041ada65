"""Content negotiation of the API's file answers (downloads and exports)."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class FileNegotiation(BaseContentNegotiation):
    """A file answers in its own type (the export: the one its `format` parameter names) whatever Accept
    says, and its errors in problem+json as everywhere; DRF's own negotiation would take ?format= for a
    renderer's name, and refuse a browser that does not accept JSON."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type
