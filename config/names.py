"""Names of corpora and services: they appear in URL paths and on disk, so they are kept plain."""

from __future__ import annotations

import re

from config.errors import BadRequest

NAME_MAX = 100
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
NAME_RULE = f"1-{NAME_MAX} letters, digits, '.', '_' or '-', starting with a letter or digit, not 'new'"
# Words the screens use as path segments (/corpora/new), so they cannot be names.
RESERVED_NAMES = frozenset({"new"})


def name_is_valid(value: object) -> bool:
    return isinstance(value, str) and bool(NAME_PATTERN.fullmatch(value)) and value not in RESERVED_NAMES


def name_check(value: object, *, field: str = "name") -> str:
    """Return the name if it is acceptable, else raise BadRequest naming the rule."""
    if not isinstance(value, str) or not name_is_valid(value):
        shown = repr(value)[:60]
        raise BadRequest(f"{field} {shown} is not a valid name: {NAME_RULE}.", errors={field: [NAME_RULE]})
    return value
