"""The marked column of a source line (conversion.source_context), split for the document screen."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def column_parts(line: dict[str, Any], column: int | None) -> tuple[str, str, str] | None:
    """A shown line's text before the column, the character at it (empty at the line's end) and after it;
    None when the column is not within the shown text (no column, or outside a long line's window)."""
    if column is None:
        return None
    text, at = line["text"], column - line["offset"]
    if not 0 <= at <= len(text):
        return None
    return text[:at], text[at : at + 1], text[at + 1 :]
