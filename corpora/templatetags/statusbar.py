"""The status bar's geometry: segments drawn as SVG rectangles, sized by attributes rather than inline
styles, which the screens' Content-Security-Policy forbids."""

from __future__ import annotations

from typing import Any

from django import template

from corpora.statuses import OVERVIEW_ORDER

register = template.Library()

# Bar order, left to right: finished outcomes first, then what is still to do.
_SEGMENTS = [(key, key.replace("_", " ")) for key in OVERVIEW_ORDER]


@register.filter
def status_bar(counts: dict[str, Any]) -> dict[str, Any]:
    """Each non-empty status with its offset, width (task counts) and share of the total in percent."""
    total = counts.get("total") or 0
    segments, offset = [], 0
    for key, label in _SEGMENTS:
        count = counts.get(key) or 0
        if count:
            percent = round(100 * count / total) if total else 0
            segments.append({"key": key, "label": label, "count": count, "x": offset, "percent": percent})
            offset += count
    return {"width": max(offset, 1), "segments": segments}
