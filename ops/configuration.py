"""The effective configuration: environment values (the defaults) with the overrides set through the API.

Every key is dotted (`group.name`) and maps to one Django setting. Live keys are applied in every process
within SYNC_SECONDS of a change (`config_sync`, called by the web middleware, the job worker and the
dispatcher's loop); the others are applied when a process starts."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction
from django.db.models import F

from config.errors import BadRequest

SYNC_SECONDS = 2.0
MASK = "********"


@dataclass(frozen=True)
class Key:
    name: str  # dotted
    setting: str
    env: str
    kind: str  # int, path, paths
    live: bool
    minimum: int | None = None
    maximum: int | None = None


KEYS = {
    key.name: key
    for key in [
        Key(
            "dispatcher.ventilator_port",
            "DISPATCHER_VENTILATOR_PORT",
            "DISPATCHER_VENTILATOR_PORT",
            "int",
            False,
            1,
            65535,
        ),
        Key("dispatcher.sink_port", "DISPATCHER_SINK_PORT", "DISPATCHER_SINK_PORT", "int", False, 1, 65535),
        Key(
            "dispatcher.message_size",
            "DISPATCHER_MESSAGE_SIZE",
            "DISPATCHER_MESSAGE_SIZE",
            "int",
            False,
            1024,
            2**31 - 1,
        ),
        Key(
            "dispatcher.max_in_flight",
            "DISPATCHER_MAX_IN_FLIGHT",
            "DISPATCHER_MAX_IN_FLIGHT",
            "int",
            True,
            1,
            10_000_000,
        ),
        Key("dispatcher.max_attempts", "DISPATCHER_MAX_ATTEMPTS", "DISPATCHER_MAX_ATTEMPTS", "int", True, 1, 1000),
        Key(
            "dispatcher.lease_seconds",
            "DISPATCHER_LEASE_SECONDS",
            "DISPATCHER_LEASE_SECONDS",
            "int",
            True,
            1,
            7 * 86400,
        ),
        Key("dispatcher.lease_batch", "DISPATCHER_LEASE_BATCH", "DISPATCHER_LEASE_BATCH", "int", True, 1, 100_000),
        Key("dispatcher.result_batch", "DISPATCHER_RESULT_BATCH", "DISPATCHER_RESULT_BATCH", "int", False, 1, 100_000),
        Key("dispatcher.reap_seconds", "DISPATCHER_REAP_SECONDS", "DISPATCHER_REAP_SECONDS", "int", True, 1, 3600),
        Key("results.max_bytes", "RESULT_MAX_BYTES", "RESULT_MAX_BYTES", "int", False, 1024, 2**40),
        Key("reports.page_size_max", "MAX_REPORT_PAGE_SIZE", "MAX_REPORT_PAGE_SIZE", "int", True, 1, 100_000),
        Key("reports.offset_max", "MAX_REPORT_OFFSET", "MAX_REPORT_OFFSET", "int", True, 0, 100_000_000),
        Key("jobs.stall_seconds", "JOB_STALL_SECONDS", "JOB_STALL_SECONDS", "int", True, 1, 7 * 86400),
        Key("directories.corpus_roots", "CORPUS_ROOTS", "CORPUS_ROOTS", "paths", False),
        Key("directories.export_root", "EXPORT_ROOT", "EXPORT_ROOT", "path", False),
        Key("directories.results_dir", "RESULTS_DIR", "RESULTS_DIR", "path", False),
    ]
}
# Shown, set only in the environment (they are read before the database can be).
READ_ONLY = {
    "database.url": ("DATABASE_URL", "DATABASE_URL"),
    "pool.enabled": ("DB_POOL", "DB_POOL"),
    "pool.min": ("DB_POOL_MIN", "DB_POOL_MIN"),
    "pool.max": ("DB_POOL_MAX", "DB_POOL_MAX"),
    "pool.timeout": ("DB_POOL_TIMEOUT", "DB_POOL_TIMEOUT"),
    "beat.job_sweep_seconds": ("JOB_SWEEP_SECONDS", "JOB_SWEEP_SECONDS"),
    "beat.report_refresh_seconds": ("REPORT_REFRESH_SECONDS", "REPORT_REFRESH_SECONDS"),
}
# The values the environment (or the built-in default) gave, before any override was applied here.
_BASE = {key.name: getattr(settings, key.setting) for key in KEYS.values()}
_state = {"version": None, "checked": 0.0}
_applied: set[str] = set()  # keys this process has set from an override


def database_url_masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:{MASK}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _env_source(env: str) -> str:
    return "environment" if os.environ.get(env) or os.environ.get(f"{env}_FILE") else "default"


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _setting_value(key: Key, value: Any) -> Any:
    if key.kind == "path":
        return Path(value).resolve()
    if key.kind == "paths":
        return [Path(v).resolve() for v in value]
    return value


def effective_config() -> dict[str, Any]:
    """Every key with its value, source and whether a change needs a restart; secrets masked."""
    from accounts.models import ApiToken
    from ops.models import ConfigOverride

    overrides = dict(ConfigOverride.objects.values_list("key", "value"))
    entries = []
    for key in KEYS.values():
        if key.name in overrides:
            value, source = overrides[key.name], "api"
        else:
            value, source = _plain(_BASE[key.name]), _env_source(key.env)
        entries.append({"key": key.name, "value": value, "source": source, "live": key.live, "settable": True})
    for name, (setting, env) in READ_ONLY.items():
        value = getattr(settings, setting)
        if name == "database.url":
            value = database_url_masked(value)
        entries.append({"key": name, "value": value, "source": _env_source(env), "live": False, "settable": False})
    tokens = ApiToken.objects.filter(revoked_at__isnull=True).count()
    entries.append({"key": "tokens.count", "value": tokens, "source": "database", "live": True, "settable": False})
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
        why = "is set in the environment only" if name in READ_ONLY or name == "tokens.count" else "is not a key"
        raise BadRequest(f"{name} {why}", errors={name: [why]})
    if value is None:
        return None  # back to the environment's value
    if key.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"{name} must be a whole number", errors={name: ["must be a whole number"]})
        if (key.minimum is not None and value < key.minimum) or (key.maximum is not None and value > key.maximum):
            why = f"must be between {key.minimum} and {key.maximum}"
            raise BadRequest(f"{name} {why}, not {value}", errors={name: [why]})
    elif key.kind == "path":
        if not isinstance(value, str) or not value.startswith("/"):
            raise BadRequest(f"{name} must be an absolute path", errors={name: ["must be an absolute path"]})
    elif not (isinstance(value, list) and value and all(isinstance(v, str) and v.startswith("/") for v in value)):
        raise BadRequest(
            f"{name} must be a list of absolute paths", errors={name: ["must be a list of absolute paths"]}
        )
    return value


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
        before = {name: current.get(name, _plain(_BASE[name])) for name in checked}
        for name, value in checked.items():
            if value is None:
                ConfigOverride.objects.filter(key=name).delete()
            else:
                ConfigOverride.objects.update_or_create(key=name, defaults={"value": value, "updated_by": actor[:100]})
        after = {name: _plain(_BASE[name]) if value is None else value for name, value in checked.items()}
        ConfigVersion.objects.get_or_create(pk=1)
        ConfigVersion.objects.filter(pk=1).update(version=F("version") + 1)
    restart = sorted(name for name in checked if not KEYS[name].live)
    config_sync(force=True)
    return {"before": before, "after": after, "restart_required": restart}


def config_sync(*, force: bool = False, initial: bool = False) -> bool:
    """Apply the stored overrides to this process's settings when they changed (checked at most every
    SYNC_SECONDS). The first sync (or `initial`) applies every key; later ones only the live keys.
    Returns whether anything was applied."""
    from ops.models import ConfigOverride, ConfigVersion

    now = time.monotonic()
    if not force and not initial and now - _state["checked"] < SYNC_SECONDS:
        return False
    _state["checked"] = now
    version = ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first() or 0
    first = _state["version"] is None or initial
    if version == _state["version"] and not first:
        return False
    _state["version"] = version
    overrides = dict(ConfigOverride.objects.values_list("key", "value"))
    for key in KEYS.values():
        if not (key.live or first):
            continue
        value = overrides.get(key.name)
        if value is not None:
            setattr(settings, key.setting, _setting_value(key, value))
            _applied.add(key.name)
        elif key.name in _applied:  # an override went away: back to the environment's value
            setattr(settings, key.setting, _BASE[key.name])
            _applied.discard(key.name)
    return True


def config_forget() -> None:
    """Put this process back as it started: the environment's values, no override synced yet (for tests)."""
    for name in _applied:
        setattr(settings, KEYS[name].setting, _BASE[name])
    _applied.clear()
    _state.update(version=None, checked=0.0)
