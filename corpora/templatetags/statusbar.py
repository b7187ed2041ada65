"""The status bar's geometry (config.charts.share_bar): segments drawn as SVG rectangles, sized by attributes
rather than inline styles, which the screens' Content-Security-Policy forbids."""

from __future__ import annotations

from typing import Any

from django import template

from config.charts import ShareBar, Stack, share_bar
from corpora.statuses import OVERVIEW_ORDER

register = template.Library()


@register.filter
def status_bar(counts: dict[str, Any]) -> ShareBar:
    """Each non-empty status, finished outcomes first and then what is still to do, with its offset, width (task
    counts) and share of the total in percent."""
    return share_bar(Stack.of(counts, OVERVIEW_ORDER))
