"""The marked place of a source line (conversion.source_context), split for the document screen."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def column_parts(line: dict[str, Any], source: dict[str, Any]) -> tuple[str, str, str] | None:
    """A shown line's text before the message's column, the text marked (the range when it ends on this
    line, else the one character at the column; empty at the line's end) and the text after; None on
    another line than the message's, or when the column is not within the shown text."""
    column = source["column"]
    if column is None or line["number"] != source["line"]:
        return None
    text, start = line["text"], column - line["offset"]
    if not 0 <= start <= len(text):
        return None
    end = start + 1
    if source["to_line"] == source["line"] and source["to_column"] is not None:
        end = max(end, source["to_column"] - line["offset"])
    return text[:start], text[start:end], text[end:]
