"""How the screens show a converter profile: its JSON, as the API gives it, indented."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def profile_json(profile: dict[str, Any] | None) -> str:
    """The profile as indented JSON with sorted keys (the canonical order); empty for none."""
    return "" if profile is None else json.dumps(profile, indent=2, sort_keys=True)
