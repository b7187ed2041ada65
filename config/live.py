"""Live configuration keys follow their stored values in a running process (PUT /api/config, `manage.py
config set`): the web middleware, the job worker and the dispatcher's loop call `config_sync`, which reads
the overrides' version (one query at most every SYNC_SECONDS) and, when it moved, applies the stored value of
every live key to this process's settings. The tables are read by name, as `config.overrides.stored` reads
them at start, so the low layers that call it (jobs, the dispatcher) import nothing of the ops app."""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.db import connection

from config.overrides import KEYS, problem, setting_value

SYNC_SECONDS = 2.0
_state = {"version": None, "checked": 0.0}
_applied: set[str] = set(settings.CONFIG_STORED_AT_START)  # keys whose setting an override has set


def config_sync(*, force: bool = False) -> bool:
    """Apply the stored values of the live keys to this process's settings when they changed (checked at most
    every SYNC_SECONDS); the others were read when the settings loaded and wait for a restart. Returns
    whether anything was applied."""
    now = time.monotonic()
    if not force and now - _state["checked"] < SYNC_SECONDS:
        return False
    _state["checked"] = now
    with connection.cursor() as cursor:
        cursor.execute("SELECT version FROM ops_configversion WHERE id = 1")
        row = cursor.fetchone()
    version = row[0] if row else 0
    if version == _state["version"]:
        return False
    _state["version"] = version
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, value::text FROM ops_configoverride")
        stored = {name: json.loads(value) for name, value in cursor.fetchall()}
    for key in KEYS.values():
        if not key.live:
            continue
        value = stored.get(key.name)
        if value is not None and problem(key, value) is None:
            setattr(settings, key.setting, setting_value(key, value))
            _applied.add(key.name)
        elif key.name in _applied:  # an override went away: back to the environment's value
            setattr(settings, key.setting, settings.CONFIG_ENVIRONMENT[key.name])
            _applied.discard(key.name)
    return True


def config_forget() -> None:
    """Put this process's settings back to the environment's values, no override synced yet (for tests)."""
    for name in _applied:
        setattr(settings, KEYS[name].setting, settings.CONFIG_ENVIRONMENT[name])
    _applied.clear()
    _state.update(version=None, checked=0.0)
