"""What the workers screen shows of a worker's kill counts: the reasons with a count, in their order."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def kills_given(kills: dict[str, int]) -> list[tuple[str, int]]:
    """The (reason, count) pairs of a worker record's kills whose count is not 0."""
    return [(reason, count) for reason, count in kills.items() if count]
