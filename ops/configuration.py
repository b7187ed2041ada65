"""The effective configuration: environment values (the defaults) with the overrides set through the API.

The keys are declared in config/keys.py and checked by `config.overrides`, which applies the stored values once
as a process's apps become ready. Live keys are read through `config.live.get_config()`, which every process
brings up to date within a few seconds of a change (the web middleware, the job worker and the dispatcher's
loop); the others take a change at the next start."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from config.errors import BadRequest
from config.keys import DECLARED
from config.live import get_config
from config.overrides import KEYS, plain, setting_value
from ops.choices import ConfigSource

MASK = "********"
# Shown, never settable, and why (the overrides are stored in the database that URL names).
NOT_SETTABLE = {
    "database.url": "is set in the environment only: the overrides are stored in the database it names",
    "tokens.count": "is a count of the active tokens: create or revoke tokens instead",
}
# What the keys outside config.overrides.KEYS govern: the declared ones (config/keys.py) and the token count.
DESCRIPTIONS = {
    **{key.name: key.description for key in DECLARED.values() if key.name is not None and not key.settable},
    "tokens.count": "Active API tokens (manage.py create_token, revoke_token).",
}


def database_url_masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:{MASK}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _env_source(env: str) -> str:
    return ConfigSource.ENVIRONMENT if os.environ.get(env) or os.environ.get(f"{env}_FILE") else ConfigSource.DEFAULT


def environment_value(name: str) -> Any:
    return plain(settings.CONFIG_ENVIRONMENT[name])


def _entry(
    name: str, value: Any, source: str, *, live: bool, running: Any = None, pending: bool = False
) -> dict[str, Any]:
    """One key as GET /api/config shows it; a key given no running value (not settable) runs with its value."""
    description = KEYS[name].description if name in KEYS else DESCRIPTIONS[name]
    return {
        "key": name, "value": value, "source": source, "live": live, "settable": name not in NOT_SETTABLE,
        "running": value if running is None else running, "restart_pending": pending, "description": description,
    }  # fmt: skip


def effective_config() -> dict[str, Any]:
    """Every key with its value (stored, else the environment's), its source, the value this process runs with,
    and whether the two differ until a restart; secrets masked."""
    from accounts.models import ApiToken
    from ops.models import ConfigOverride

    stored = dict(ConfigOverride.objects.values_list("key", "value"))
    live = get_config()
    entries = []
    for name, key in KEYS.items():
        source: str
        if name in stored:
            value, source = stored[name], ConfigSource.API
            wanted = plain(setting_value(key, value))
        else:
            value, source = environment_value(name), _env_source(key.env)
            wanted = value
        running = plain(getattr(live if key.live else settings, key.setting))
        entries.append(_entry(name, value, source, live=key.live, running=running, pending=running != wanted))
    url = database_url_masked(settings.DATABASE_URL)
    entries.append(_entry("database.url", url, _env_source(DECLARED["DATABASE_URL"].env), live=False))
    tokens = ApiToken.objects.filter(revoked_at__isnull=True).count()
    entries.append(_entry("tokens.count", tokens, ConfigSource.DATABASE, live=True))
    entries.sort(key=lambda e: e["key"])
    return {"entries": entries}


def assignments(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """A change from (dotted key, text) pairs, as the command line and the screen give them: each text is
    JSON when it parses (numbers, true/false, lists, null to reset), else taken as it is (a bare path)."""
    change: dict[str, Any] = {}
    for name, text in pairs:
        if not name:
            raise BadRequest("a key is required", errors={"key": ["required"]})
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        node = change
        *groups, leaf = name.split(".")
        for group in groups:
            node = node.setdefault(group, {})
            if not isinstance(node, dict):
                raise BadRequest(f"{name} is given twice", errors={name: ["given twice"]})
        node[leaf] = value
    return change
