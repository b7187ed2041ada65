"""The JSON parser of the API: malformed or absurdly nested bodies are a 400, never a crash."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# No request body of the API nests beyond three levels; this leaves room and stops pathological input.
JSON_MAX_DEPTH = 32


def json_depth_exceeds(data: Any, limit: int) -> bool:
    """Whether containers in `data` nest deeper than `limit` (walked with a stack, not recursion)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children: Iterable[object]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class BoundedJSONParser(JSONParser):
    """DRF's JSONParser, with nesting bounded: Python's decoder raises RecursionError near 1,000 levels,
    which DRF does not catch, and deep structures are costly everywhere they travel after parsing."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"JSON parse error - nested deeper than {JSON_MAX_DEPTH} levels.") from exc
        if json_depth_exceeds(data, JSON_MAX_DEPTH):
            raise ParseError(f"JSON parse error - nested deeper than {JSON_MAX_DEPTH} levels.")
        return data
