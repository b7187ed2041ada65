"""The configuration keys an operator may set at run time (PUT /api/config, `manage.py config set`), their
checks, and the stored values every process reads when its settings load.

A key is dotted (`group.name`) and names one Django setting, whose environment variable gives the default.
Stored values (table `ops_configoverride`) win over the environment. The settings read them once, as the
process starts, so keys that only a start can apply (ports, the database pool, beat intervals) follow
them after a restart; live keys are read through `config.live.get_config()`, which follows every change.

No Django import here: the settings module loads this before Django is configured."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Key:
    name: str  # dotted
    setting: str  # the Django setting it sets; its environment variable has the same name
    kind: str  # int, bool, path, paths
    live: bool  # applied by running processes within seconds; else at their next start
    description: str  # what the value governs, in a sentence for the configuration screen and GET /api/config
    minimum: int | None = None
    maximum: int | None = None


def _int(name: str, setting: str, live: bool, minimum: int, maximum: int, description: str) -> Key:
    return Key(name, setting, "int", live, description, minimum, maximum)


KEYS = {
    key.name: key
    for key in [
        _int("dispatcher.ventilator_port", "DISPATCHER_VENTILATOR_PORT", False, 1, 65535,
             "TCP port where workers ask the dispatcher for tasks."),
        _int("dispatcher.sink_port", "DISPATCHER_SINK_PORT", False, 1, 65535,
             "TCP port where workers send their results to the dispatcher's sink."),
        _int("dispatcher.message_size", "DISPATCHER_MESSAGE_SIZE", False, 1024, 2**31 - 1,
             "Frame size, in bytes, of the payloads and results sent over the dispatcher's sockets."),
        _int("dispatcher.max_in_flight", "DISPATCHER_MAX_IN_FLIGHT", True, 1, 10_000_000,
             "Tasks leased to workers at once; past it, workers are told to wait."),
        _int("dispatcher.max_attempts", "DISPATCHER_MAX_ATTEMPTS", True, 1, 1000,
             "Leases a task gets before it is marked fatal (never completed)."),
        _int("dispatcher.lease_seconds", "DISPATCHER_LEASE_SECONDS", True, 1, 7 * 86400,
             "How long a leased task may take before it is handed out again, unless its service overrides it."),
        _int("dispatcher.lease_batch", "DISPATCHER_LEASE_BATCH", True, 1, 100_000,
             "Tasks the dispatcher leases from the database in one statement."),
        _int("dispatcher.result_batch", "DISPATCHER_RESULT_BATCH", False, 1, 100_000,
             "Results the sink ingests in one transaction."),
        _int("dispatcher.reap_seconds", "DISPATCHER_REAP_SECONDS", True, 1, 3600,
             "How often the dispatcher looks for expired leases to hand out again."),
        _int("dispatcher.worker_silence_seconds", "DISPATCHER_WORKER_SILENCE_SECONDS", True, 5, 86400,
             "A worker that sent heartbeats and falls silent this long has its leases given back."),
        Key("dispatcher.longest_first", "DISPATCHER_LONGEST_FIRST", "bool", True,
            "Leases go out longest expected runtime first; off: first in, first out."),
        # The per-conversion limits: read by a worker as it starts (manage.py worker, up's workers) and by
        # POST /convert at each request, from the values its web process started with.
        _int("conversion.timeout_seconds", "CONVERSION_TIMEOUT_SECONDS", False, 1, 86400,
             "Wall-clock time one conversion of a worker may run before it is killed."),
        _int("conversion.memory_mb", "CONVERSION_MEMORY_MB", False, 64, 1024 * 1024,
             "Address space, in MB, one conversion may use (workers and POST /convert)."),
        _int("conversion.disk_mb", "CONVERSION_DISK_MB", False, 16, 1024 * 1024,
             "Disk space, in MB, one conversion may hold (its working directory and /tmp together)."),
        _int("conversion.max_processes", "CONVERSION_MAX_PROCESSES", False, 4, 100_000,
             "Processes one conversion may have at once."),
        _int("conversion.memory_floor_mb", "CONVERSION_MEMORY_FLOOR_MB", False, 0, 1024 * 1024,
             "Below this much available memory, in MB, a worker stops its largest conversion; 0 turns this off."),
        _int("results.max_bytes", "RESULT_MAX_BYTES", False, 1024, 2**40,
             "Largest result ZIP kept, in bytes; a bigger result makes the task invalid."),
        _int("results.min_free_mb", "RESULTS_MIN_FREE_MB", True, 0, 2**30,
             "Free space, in MB, the results volume keeps: below it the sink takes no result and no work goes out."),
        _int("reports.page_size_max", "MAX_REPORT_PAGE_SIZE", True, 1, 100_000,
             "Most rows a report page may ask for."),
        _int("reports.offset_max", "MAX_REPORT_OFFSET", True, 0, 100_000_000,
             "Deepest row offset a report page may ask for."),
        _int("jobs.stall_seconds", "JOB_STALL_SECONDS", True, 1, 7 * 86400,
             "An active job with no sign of life for longer is shown as stalled."),
        Key("directories.corpus_roots", "CORPUS_ROOTS", "paths", False,
            "Directories corpora may be imported from."),
        Key("directories.export_root", "EXPORT_ROOT", "path", False,
            "Directory where dataset exports are written."),
        Key("directories.results_dir", "RESULTS_DIR", "path", False,
            "Directory where result ZIPs are kept."),
        # Read when the database connections are set up, and by beat when it writes its schedule.
        Key("pool.enabled", "DB_POOL", "bool", False, "Each process uses a pool of database connections."),
        _int("pool.min", "DB_POOL_MIN", False, 0, 1000, "Database connections each process's pool keeps open."),
        _int("pool.max", "DB_POOL_MAX", False, 1, 1000, "Most database connections each process's pool opens."),
        _int("pool.timeout", "DB_POOL_TIMEOUT", False, 1, 3600,
             "How long, in seconds, a request waits for a pooled connection before a 503."),
        _int("beat.job_sweep_seconds", "JOB_SWEEP_SECONDS", False, 5, 86400,
             "How often beat looks for jobs of dead workers and resends lost ones."),
        _int("beat.report_refresh_seconds", "REPORT_REFRESH_SECONDS", False, 10, 7 * 86400,
             "How often beat rebuilds every report rollup slice."),
    ]
}  # fmt: skip


def problem(key: Key, value: Any) -> str | None:
    """Why the value cannot be the key's, or None when it can (None itself is a reset, always allowed)."""
    if value is None:
        return None
    if key.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be a whole number"
        if not key.minimum <= value <= key.maximum:
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
    values = {}
    for name, value in rows:
        key = KEYS.get(name)
        why = "is not a key" if key is None else problem(key, value)
        if why is not None:  # written by hand past the API's checks: say so, start without it
            print(f"configuration: the stored value of {name} is ignored: it {why}", file=sys.stderr)
            continue
        values[name] = value
    return values
