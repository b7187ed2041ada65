"""The configuration keys an operator may set at run time (PUT /api/config, `manage.py config set`, the /config
screen), their checks, and the stored values every process applies once, as its apps become ready.

A key is dotted (`group.name`) and names one Django setting; both, its bounds, whether it is live and its
description are declared in config/keys.py, whose environment variable gives the default. Stored values (table
`ops_configoverride`) win over the environment. `apply_stored` reads them once per process, when the apps are
ready (ops/apps.py), so keys that only a start can apply (ports, the database pool, beat intervals) follow them
after a restart; live keys are read through `config.live.get_config()`, which follows every change.

No Django import at module level: the settings module loads this before Django is configured."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.env import ConfigError, database_config
from config.keys import DECLARED, Key

if TYPE_CHECKING:
    from django.conf import LazySettings

__all__ = ["KEYS", "Key", "apply_stored", "beat_schedule", "pair_problem", "plain", "problem", "setting_value",
           "stored"]  # fmt: skip

# The keys settable at run time, by dotted name (in the order config/keys.py declares them).
KEYS: dict[str, Key] = {key.name: key for key in DECLARED.values() if key.name is not None and key.settable}
for _key in KEYS.values():  # a run-time key is one `problem` can check: an int has both bounds
    if _key.kind not in ("int", "bool", "path", "paths") or (_key.kind == "int" and _key.maximum is None):
        raise ConfigError(f"config/keys.py: {_key.env} cannot be set at run time as declared")


def problem(key: Key, value: Any) -> str | None:
    """Why the value cannot be the key's, or None when it can (None itself is a reset, always allowed)."""
    if value is None:
        return None
    if key.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be a whole number"
        if key.minimum is None or key.maximum is None or not key.minimum <= value <= key.maximum:
            return f"must be between {key.minimum} and {key.maximum}"
    elif key.kind == "bool":
        if not isinstance(value, bool):
            return "must be true or false"
    elif key.kind == "path":
        if not isinstance(value, str) or not value.startswith("/"):
            return "must be an absolute path"
    elif not (isinstance(value, list) and value and all(isinstance(v, str) and v.startswith("/") for v in value)):
        return "must be a list of absolute paths"
    return None


def pair_problem(values: dict[str, Any]) -> tuple[str, str] | None:
    """(key, why) when values that pass one by one do not fit together, else None."""
    if values["pool.min"] > values["pool.max"]:
        return "pool.min", f"must not be above pool.max ({values['pool.max']})"
    return None


def setting_value(key: Key, value: Any) -> Any:
    """A stored (JSON) value as the setting holds it."""
    if key.kind == "path":
        return Path(value).resolve()
    if key.kind == "paths":
        return [Path(v).resolve() for v in value]
    return value


def plain(value: Any) -> Any:
    """A setting's value as JSON shows it."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def stored(database_url: str) -> dict[str, Any]:
    """The values stored for known keys, each checked again; {} while the database does not answer or has no
    table yet (before the first migration): the process then starts on the environment's values and the
    database's own error, if any, comes when it is first used."""
    import psycopg

    try:
        with psycopg.connect(database_url, connect_timeout=3) as conn:
            rows = conn.execute("SELECT key, value FROM ops_configoverride").fetchall()
    except psycopg.Error:
        return {}
    values: dict[str, Any] = {}
    for name, value in rows:
        key = KEYS.get(name)
        why = "is not a key" if key is None else problem(key, value)
        if why is not None:  # written by hand past the API's checks: say so, start without it
            print(f"configuration: the stored value of {name} is ignored: it {why}", file=sys.stderr)
            continue
        values[name] = value
    return values


def beat_schedule(job_sweep_seconds: int, report_refresh_seconds: int) -> dict[str, dict[str, Any]]:
    """CELERY_BEAT_SCHEDULE from the beat keys' values."""
    sweep, refresh = float(job_sweep_seconds), float(report_refresh_seconds)
    return {
        "jobs-sweep-interrupted": {"task": "jobs.tasks.jobs_sweep", "schedule": sweep},
        "reports-refresh": {"task": "reports.tasks.reports_refresh_scheduled", "schedule": refresh},
        "messages-purge": {"task": "reports.tasks.messages_purge_scheduled", "schedule": sweep},
    }


def apply_stored(settings: LazySettings) -> dict[str, Any]:
    """Read the stored values once (as `stored`) and apply them: each key read only at start takes its stored
    value as its setting, the settings built from those while the settings loaded (the database pool's OPTIONS,
    the beat schedule) are built again in place; returns what was read, with which the caller primes `config.live`.
    Called as the apps become ready (ops/apps.py), before any request, task or database connection of the process.

    The settings stay as they are when nothing is stored or the database does not answer (the embedded PostgreSQL
    `up` is starting, or a fresh database before `migrate` made the table)."""
    values = stored(settings.DATABASE_URL)
    for name, value in values.items():
        key = KEYS[name]
        if not key.live:
            setattr(settings, key.setting, setting_value(key, value))
    if any(name.startswith("pool.") and not KEYS[name].live for name in values):
        options = database_config(
            settings.DATABASE_URL, pool=settings.DB_POOL, pool_min=settings.DB_POOL_MIN,
            pool_max=settings.DB_POOL_MAX, pool_timeout=settings.DB_POOL_TIMEOUT,
        )["OPTIONS"]  # fmt: skip
        for database in settings.DATABASES.values():  # `progress` shares the default's OPTIONS
            database["OPTIONS"].clear()
            database["OPTIONS"].update(options)
    if any(name.startswith("beat.") for name in values):
        settings.CELERY_BEAT_SCHEDULE.update(beat_schedule(settings.JOB_SWEEP_SECONDS, settings.REPORT_REFRESH_SECONDS))
    return values
