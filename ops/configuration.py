"""The effective configuration: environment values (the defaults) with the overrides set through the API.

The keys and their checks are in `config.overrides`, which the settings use to read the stored values as a
process starts. Live keys are applied in every process within a few seconds of a change (`config.live`,
called by the web middleware, the job worker and the dispatcher's loop); the others at the next start."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction
from django.db.models import F

from config.errors import BadRequest
from config.live import config_sync
from config.overrides import KEYS, pair_problem, plain, problem, setting_value

MASK = "********"
# Shown, never settable, and why (the overrides are stored in the database that URL names).
NOT_SETTABLE = {
    "database.url": "is set in the environment only: the overrides are stored in the database it names",
    "tokens.count": "is a count of the active tokens: create or revoke tokens instead",
}


def database_url_masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:{MASK}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _env_source(env: str) -> str:
    return "environment" if os.environ.get(env) or os.environ.get(f"{env}_FILE") else "default"


def _environment_value(name: str) -> Any:
    return plain(settings.CONFIG_ENVIRONMENT[name])


def _entry(
    name: str, value: Any, source: str, *, live: bool, running: Any = None, pending: bool = False
) -> dict[str, Any]:
    """One key as GET /api/config shows it; a key given no running value (not settable) runs with its value."""
    return {
        "key": name, "value": value, "source": source, "live": live, "settable": name not in NOT_SETTABLE,
        "running": value if running is None else running, "restart_pending": pending,
    }  # fmt: skip


def effective_config() -> dict[str, Any]:
    """Every key with its value (stored, else the environment's), its source, the value this process runs with,
    and whether the two differ until a restart; secrets masked."""
    from accounts.models import ApiToken
    from ops.models import ConfigOverride

    stored = dict(ConfigOverride.objects.values_list("key", "value"))
    entries = []
    for key in KEYS.values():
        if key.name in stored:
            value, source = stored[key.name], "api"
            wanted = plain(setting_value(key, value))
        else:
            value, source = _environment_value(key.name), _env_source(key.setting)
            wanted = value
        running = plain(getattr(settings, key.setting))
        entries.append(_entry(key.name, value, source, live=key.live, running=running, pending=running != wanted))
    url = database_url_masked(settings.DATABASE_URL)
    entries.append(_entry("database.url", url, _env_source("DATABASE_URL"), live=False))
    tokens = ApiToken.objects.filter(revoked_at__isnull=True).count()
    entries.append(_entry("tokens.count", tokens, "database", live=True))
    entries.sort(key=lambda e: e["key"])
    return {"entries": entries}


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BadRequest("the configuration change must be a JSON object", errors={prefix or "body": ["not an object"]})
    flat: dict[str, Any] = {}
    for name, value in data.items():
        dotted = f"{prefix}{name}"
        if isinstance(value, dict):  # nested keys merge: only the leaves given change
            flat.update(_flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value  # a list replaces the list before it
    return flat


def _check(name: str, value: Any) -> Any:
    key = KEYS.get(name)
    if key is None:
        why = NOT_SETTABLE.get(name, "is not a key")
        raise BadRequest(f"{name} {why}", errors={name: [why]})
    why = problem(key, value)
    if why is not None:
        # Only a number is echoed: a text put in the wrong field could be a secret.
        shown = f", not {value}" if isinstance(value, int | float) and not isinstance(value, bool) else ""
        raise BadRequest(f"{name} {why}{shown}", errors={name: [why]})
    return value


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


def config_update(data: Any, *, actor: str) -> dict[str, Any]:
    """Validate a partial (nested) change whole, then store it; returns before, after and the keys that need a
    restart. A value of null removes the override. Nothing is stored when any key is refused."""
    from ops.models import ConfigOverride, ConfigVersion

    flat = _flatten(data)
    if not flat:
        raise BadRequest("the configuration change is empty", errors={"body": ["no key given"]})
    checked = {name: _check(name, value) for name, value in flat.items()}
    with transaction.atomic():
        current = dict(ConfigOverride.objects.select_for_update().values_list("key", "value"))
        values = {name: current.get(name, _environment_value(name)) for name in KEYS}
        before = {name: values[name] for name in checked}
        after = {name: _environment_value(name) if value is None else value for name, value in checked.items()}
        clash = pair_problem(values | after)
        if clash is not None:
            name, why = clash
            raise BadRequest(f"{name} {why}", errors={name: [why]})
        for name, value in checked.items():
            if value is None:
                ConfigOverride.objects.filter(key=name).delete()
            else:
                ConfigOverride.objects.update_or_create(key=name, defaults={"value": value, "updated_by": actor[:100]})
        ConfigVersion.objects.get_or_create(pk=1)
        ConfigVersion.objects.filter(pk=1).update(version=F("version") + 1)
    restart = sorted(name for name in checked if not KEYS[name].live)
    config_sync(force=True)
    return {"before": before, "after": after, "restart_required": restart}
