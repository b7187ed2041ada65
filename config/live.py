"""The one accessor of the live configuration, as NetBox's `get_config()`: `get_config()` returns a frozen
`LiveConfig` whose values are the settings' (the environment's, the defaults) overlaid with the stored
overrides of the live keys (PUT /api/config, `manage.py config set`). Every read of a live value goes
through it; `django.conf.settings` is never changed while a process runs.

A process starts on the overrides read once as its apps became ready (`config.overrides.apply_stored`, handed
to `config_prime` by ops/apps.py).
The web middleware, the job worker and the dispatcher's loop call `config_refresh`, which reads the overrides'
version (one query at most every SYNC_SECONDS) and, when it moved, reads the overrides again and builds a
new `LiveConfig`; a reader holds whichever object was current, so its values never change under it.

The overrides' tables (of the ops models `ConfigVersion` and `ConfigOverride`) are found through the app
registry rather than an import, so that the low layers that read the configuration (jobs, services, the
dispatcher) import nothing of the ops app; `config.overrides.stored` reads them at start by their names.

`LiveConfig` is built from the declaration (config/keys.py, the keys with live=True): a frozen dataclass with one
field per live key, named as its setting, so `get_config().DISPATCHER_MAX_IN_FLIGHT` reads one."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection
from django.dispatch import receiver

from config.overrides import KEYS, problem, setting_value

SYNC_SECONDS = 2.0


if TYPE_CHECKING:

    class LiveConfig:
        """The values of the live keys, named as their settings (built from config/keys.py below)."""

        def __init__(self, **values: Any) -> None: ...
        def __getattr__(self, setting: str) -> Any: ...

else:
    LiveConfig = dataclasses.make_dataclass(
        "LiveConfig",
        [(key.setting, key.kind) for key in KEYS.values() if key.live],  # the type by name: "int", "bool"
        frozen=True,
        namespace={"__doc__": "The values of the live keys (config/keys.py, live=True), named as their settings."},
    )
    LiveConfig.__module__ = __name__


LIVE_SETTINGS: frozenset[str] = frozenset(key.setting for key in KEYS.values() if key.live)


class _State:
    version: int | None = None  # the overrides' version last read; None: not read yet in this process
    checked = 0.0  # when the version was last read (monotonic)
    overrides: dict[str, Any] = {}  # the stored values of the live keys, by dotted name, checked
    current: LiveConfig | None = None  # built from settings and overrides on first use after a change


def _live_overrides(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name in KEYS and KEYS[name].live}


def config_prime(stored: dict[str, Any]) -> None:
    """Start on the overrides read as the apps became ready (config.overrides.apply_stored), with no query."""
    _State.overrides = _live_overrides(stored)
    _State.current = None


def _build() -> LiveConfig:
    values: dict[str, Any] = {}
    for name, key in KEYS.items():
        if key.live:
            stored = _State.overrides.get(name)
            values[key.setting] = getattr(settings, key.setting) if stored is None else setting_value(key, stored)
    return LiveConfig(**values)


def get_config() -> LiveConfig:
    """The live configuration as this process last read it: no query, safe on hot paths and in any transaction."""
    current = _State.current
    if current is None:
        current = _State.current = _build()
    return current


def config_refresh(*, force: bool = False) -> bool:
    """Read the overrides again when their version moved (checked at most every SYNC_SECONDS unless `force`),
    so that the next `get_config()` returns their values. Returns whether they were read."""
    now = time.monotonic()
    if not force and now - _State.checked < SYNC_SECONDS:
        return False
    _State.checked = now
    versions, overrides = (apps.get_model("ops", name)._meta.db_table for name in ("ConfigVersion", "ConfigOverride"))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {versions} WHERE id = 1")  # noqa: S608  (a model's table)
        row = cursor.fetchone()
    version = row[0] if row else 0
    if version == _State.version:
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, value::text FROM {overrides}")  # noqa: S608  (a model's table)
        stored = {name: json.loads(value) for name, value in cursor.fetchall()}
    # A value written past the API's checks is left out, as at start: the setting's value holds.
    checked = {name: value for name, value in stored.items() if name in KEYS and problem(KEYS[name], value) is None}
    _State.overrides = _live_overrides(checked)
    _State.version = version
    _State.current = None
    return True


def config_forget() -> None:
    """Drop the overrides this process read: `get_config()` gives the settings' values until the next refresh
    (for tests, whose database each starts without overrides)."""
    _State.overrides = {}
    _State.version = None
    _State.checked = 0.0
    _State.current = None


@receiver(setting_changed)
def _setting_changed(*, setting: str, **_: Any) -> None:
    """A test's settings override of a live key's default is seen by the next `get_config()`."""
    if setting in LIVE_SETTINGS:
        _State.current = None
