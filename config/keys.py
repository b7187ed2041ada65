"""Every setting the environment gives, declared once, as NetBox declares its `PARAMS`: the environment variable,
the Django setting it fills, its kind, default, bounds, whether it may be set at run time (and then its dotted
name and whether running processes take a change live), its description and its group in the doc.

Derived from `DECLARED`: the settings' values (`read`, in config/settings.py), the run-time keys and their checks
(config/overrides.py: PUT /api/config, `manage.py config set`, the /config screen), the live configuration
(config/live.py, `get_config()`), the listing of GET /api/config (ops/configuration.py) and docs/configuration.md
(`python -m config.keys > docs/configuration.md`; tests/config/test_keys.py fails when the two differ).

No Django import here: the settings module reads this before Django is configured."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from config import embedded, ports
from config.env import ConfigError, env_bool, env_choice, env_int, env_list, env_roots, env_str, trusted_proxies
from conversion.choices import SandboxMode, SandboxProc

BASE_DIR = Path(__file__).resolve().parent.parent

# How a key's text is read: `int` a whole number within the bounds, `bool` true or false, `str` as given, `choice`
# one of `choices`, `list` items split at `separator`, `path` an absolute (resolved) path, `file` a path as given,
# `paths` paths split at `separator` (resolved), `roots` absolute directories other than `/` (none by default).
Kind = Literal["int", "bool", "str", "choice", "list", "path", "file", "paths", "roots"]


@dataclass(frozen=True)
class Derived:
    """A default computed from the values of the keys declared before it, only when the variable is unset."""

    shown: str  # the default as the doc shows it
    compute: Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Key:
    env: str  # the environment variable; NAME_FILE names a file holding the value instead
    kind: Kind
    default: Any  # a value of the kind, or a Derived
    group: str  # the section of docs/configuration.md
    description: str  # what the value governs; for a run-time key also the sentence of the /config screen
    minimum: int | None = None
    maximum: int | None = None
    name: str | None = None  # dotted (`group.name`): listed by GET /api/config and on the /config screen
    settable: bool = True  # with a name: PUT /api/config and `manage.py config set` may set it
    live: bool = False  # a run-time change reaches running processes within seconds; else at their next start
    setting: str = ""  # the Django setting it fills; the variable's name unless given
    choices: tuple[str, ...] = ()
    separator: str = ","
    shown: str | None = None  # the default as the doc shows it, when not the value itself
    check: Callable[[Any], object] | None = field(default=None, compare=False)  # raises ConfigError

    def __post_init__(self) -> None:
        if not self.setting:
            object.__setattr__(self, "setting", self.env)


def _secret_key(values: Mapping[str, Any]) -> str:
    """One generated once and kept under VAR_DIR."""
    key_file: Path = values["VAR_DIR"] / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


def _below_4_gib(value: int) -> None:
    if value >= 4 * 1024**3:  # payloads are plain ZIP archives (conversion.zips.zip_stream)
        raise ConfigError(f"PAYLOAD_MAX_BYTES must be below 4 GiB, not {value}")


def _proxies(value: list[str]) -> None:
    trusted_proxies(tuple(value))  # a malformed entry stops start-up, not the first request


_MB = 1024 * 1024
_SAN = tuple(mode.value for mode in SandboxMode)
_PROC = tuple(proc.value for proc in SandboxProc)
_PROCESS = _WEB = "Process and web"
_DATA = _DIRS = "Database, Redis, directories"
_DISP = "Dispatcher"
_RES = _CONV = "Results and conversions"
_CONVERT = "POST /convert"
_JOBS = "Jobs and reports"

DECLARED: dict[str, Key] = {
    key.env: key
    for key in [
        Key("VAR_DIR", "path", Derived("`./var`", lambda v: BASE_DIR / "var"), _PROCESS,
            "Embedded data, the generated secret key, sockets (`var/run/`)."),
        Key("SECRET_KEY", "str", Derived("generated once into `var/secret_key`", _secret_key), _PROCESS,
            "Django's signing key."),
        Key("DEBUG", "bool", False, _PROCESS, "Django's debug mode."),
        Key("LOG_LEVEL", "str", "INFO", _PROCESS, "Python log level (any case)."),
        Key("ALLOWED_HOSTS", "list", ["localhost", "127.0.0.1", "[::1]", "testserver"], _WEB,
            "Host names the web server answers."),
        Key("CSRF_TRUSTED_ORIGINS", "list", [], _WEB, "Origins, needed behind an HTTPS proxy."),
        Key("SESSION_COOKIE_SECURE", "bool", False, _WEB, "Set `true` behind HTTPS."),
        Key("REQUEST_MAX_BYTES", "int", 2_621_440, _WEB, "A request body above this is refused (413) before it is"
            " read.", minimum=1024, setting="DATA_UPLOAD_MAX_MEMORY_SIZE", shown="2.5 MiB"),
        Key("AUTH_FAILURE_LIMIT", "int", 20, _WEB, "Wrong tokens from one address within the window before its"
            " further wrong ones get 429 (counted in Redis).",
            minimum=1),
        Key("AUTH_FAILURE_WINDOW_SECONDS", "int", 600, _WEB, "That window.", minimum=1),
        Key("PASSKEY_RP_ID", "str", "localhost", _WEB, "Passkeys' relying party: the host name the screens are"
            " served at."),
        Key("PASSKEY_RP_NAME", "str", "Corpus conversion", _WEB, "The name authenticators show."),
        Key("PASSKEY_ORIGINS", "list",
            Derived("`http://localhost:8000`", lambda v: [f"http://{v['PASSKEY_RP_ID']}:{ports.WEB_PORT}"]), _WEB,
            "Origins the screens are opened at (`up` derives them from its"
            " `--host` and `--port`)."),
        Key("PASSKEY_CHALLENGE_SECONDS", "int", 300, _WEB, "How long a passkey challenge may be answered.", minimum=10),
        Key("TRUSTED_PROXIES", "list", [], _WEB, "Addresses or networks of reverse proxies whose"
            " `X-Forwarded-For` names the client.", shown="none (off)", check=_proxies),
        Key("DATABASE_URL", "str", Derived("embedded PostgreSQL", lambda v: embedded.database_url(v["VAR_DIR"])),
            _DATA, "The PostgreSQL database of every process; the values set at"
            " run time are stored in it.", name="database.url",
            settable=False),
        Key("REDIS_URL", "str", Derived("embedded Redis", lambda v: embedded.redis_url(v["VAR_DIR"])), _DATA,
            "Celery's broker and every Redis client: `redis://`, `rediss://`, `unix://`."),
        Key("DB_POOL", "bool", True, _DATA, "Each process uses a pool of database connections.", name="pool.enabled"),
        Key("DB_POOL_MIN", "int", 1, _DATA, "Database connections each process's pool keeps open.",
            minimum=0, maximum=1000, name="pool.min"),
        Key("DB_POOL_MAX", "int", 8, _DATA, "Most database connections each process's pool opens.",
            minimum=1, maximum=1000, name="pool.max"),
        Key("DB_POOL_TIMEOUT", "int", 10, _DATA, "How long, in seconds, a request waits for a pooled connection"
            " before a 503.", minimum=1, maximum=3600, name="pool.timeout"),
        Key("CORPUS_ROOTS", "paths", Derived("`var/corpora`", lambda v: [v["VAR_DIR"] / "corpora"]), _DIRS,
            "Directories corpora may be imported from.", separator=":", name="directories.corpus_roots"),
        Key("EXPORT_ROOT", "path", Derived("`var/exports`", lambda v: v["VAR_DIR"] / "exports"), _DIRS,
            "Directory where dataset exports are written.", name="directories.export_root"),
        Key("RESULTS_DIR", "path", Derived("`var/results`", lambda v: v["VAR_DIR"] / "results"), _DIRS,
            "Directory where result ZIPs are kept.", name="directories.results_dir"),
        Key("PROFILE_ROOTS", "roots", [], _DIRS, "Absolute directories (never `/`) where a profile's engine,"
            " stylesheets and bindings may lie.",
            separator=":", shown="none"),
        Key("DISPATCHER_BIND", "str", ports.DISPATCHER_BIND, _DISP, "Address the dispatcher binds."),
        Key("DISPATCHER_HOST", "str", "127.0.0.1", _DISP, "Address workers connect to."),
        Key("DISPATCHER_VENTILATOR_PORT", "int", ports.DISPATCHER_VENTILATOR_PORT, _DISP,
            "TCP port where workers ask the dispatcher for tasks.",
            minimum=1, maximum=65535, name="dispatcher.ventilator_port"),
        Key("DISPATCHER_SINK_PORT", "int", ports.DISPATCHER_SINK_PORT, _DISP,
            "TCP port where workers send their results to the dispatcher's sink.",
            minimum=1, maximum=65535, name="dispatcher.sink_port"),
        Key("DISPATCHER_MESSAGE_SIZE", "int", 100_000, _DISP, "Frame size, in bytes, of the payloads and results"
            " sent over the dispatcher's sockets.", minimum=1024, maximum=2**31 - 1, name="dispatcher.message_size"),
        Key("DISPATCHER_MAX_IN_FLIGHT", "int", 2000, _DISP, "Tasks leased to workers at once; past it, workers are"
            " told to wait.", minimum=1, maximum=10_000_000, name="dispatcher.max_in_flight", live=True),
        Key("DISPATCHER_MAX_ATTEMPTS", "int", 3, _DISP, "Leases a task gets before it is marked fatal (never"
            " completed).", minimum=1, maximum=1000, name="dispatcher.max_attempts", live=True),
        Key("DISPATCHER_LEASE_SECONDS", "int", 900, _DISP, "How long a leased task may take before it is handed out"
            " again, unless its service overrides it.",
            minimum=1, maximum=7 * 86400, name="dispatcher.lease_seconds", live=True),
        Key("DISPATCHER_LEASE_BATCH", "int", 200, _DISP, "Tasks the dispatcher leases from the database in one"
            " statement.", minimum=1, maximum=100_000, name="dispatcher.lease_batch", live=True),
        Key("DISPATCHER_RESULT_BATCH", "int", 500, _DISP, "Results the sink ingests in one transaction.",
            minimum=1, maximum=100_000, name="dispatcher.result_batch"),
        Key("DISPATCHER_REAP_SECONDS", "int", 5, _DISP, "How often the dispatcher looks for expired leases to hand"
            " out again.", minimum=1, maximum=3600, name="dispatcher.reap_seconds", live=True),
        Key("DISPATCHER_WORKER_SILENCE_SECONDS", "int", 60, _DISP, "A worker that sent heartbeats and falls silent"
            " this long has its leases given back.",
            minimum=5, maximum=86400, name="dispatcher.worker_silence_seconds", live=True),
        Key("DISPATCHER_LONGEST_FIRST", "bool", True, _DISP, "Leases go out longest expected runtime first; off:"
            " first in, first out.", name="dispatcher.longest_first", live=True),
        Key("RESULT_MAX_BYTES", "int", 64 * _MB, _RES, "Largest result ZIP kept, in bytes; a bigger result makes the"
            " task invalid.", minimum=1024, maximum=2**40, name="results.max_bytes", shown="64 MiB"),
        Key("RESULTS_MIN_FREE_MB", "int", 1024, _RES, "Free space, in MB, the results volume keeps: below it the"
            " sink takes no result and no work goes out.",
            minimum=0, maximum=2**30, name="results.min_free_mb", live=True),
        Key("RESULTS_REMOVE_INLINE", "int", 1000, _RES, "Result ZIPs a deletion removes itself; more go to a job.",
            minimum=0),
        Key("PAYLOAD_MAX_BYTES", "int", 512 * _MB, _RES, "Most a document may unpack to for a worker (below 4 GiB);"
            " more makes the task invalid.",
            minimum=1024, shown="512 MiB", check=_below_4_gib),
        Key("CONVERSION_TIMEOUT_SECONDS", "int", 300, _CONV, "Wall-clock time one conversion of a worker may run"
            " before it is killed.", minimum=1, maximum=86400, name="conversion.timeout_seconds"),
        Key("CONVERSION_MEMORY_MB", "int", 4096, _CONV, "Address space, in MB, one conversion may use (workers and"
            " POST /convert).", minimum=64, maximum=1024 * 1024, name="conversion.memory_mb"),
        Key("CONVERSION_DISK_MB", "int", 2048, _CONV, "Disk space, in MB, one conversion may hold (its working"
            " directory and /tmp together).", minimum=16, maximum=1024 * 1024, name="conversion.disk_mb"),
        Key("CONVERSION_MAX_PROCESSES", "int", 64, _CONV, "Processes one conversion may have at once.",
            minimum=4, maximum=100_000, name="conversion.max_processes"),
        Key("CONVERSION_MEMORY_FLOOR_MB", "int", 1024, _CONV, "Below this much available memory, in MB, a worker"
            " stops its largest conversion; 0 turns this off.",
            minimum=0, maximum=1024 * 1024, name="conversion.memory_floor_mb"),
        Key("CONVERSION_SANDBOX", "choice", SandboxMode.BWRAP.value, _CONV,
            "`bwrap` sandboxes every latexmlc; `none` does not.", choices=_SAN),
        Key("CONVERSION_BWRAP", "str", "bwrap", _CONV, "The bubblewrap executable."),
        Key("CONVERSION_SANDBOX_PROC", "choice", SandboxProc.MOUNT.value, _CONV,
            "`none` gives the sandbox no `/proc` (for containers).", choices=_PROC),
        Key("CONVERT_MAX_BYTES", "int", _MB, _CONVERT, "Largest TeX input.", minimum=1, shown="1 MiB"),
        Key("CONVERT_TIMEOUT_SECONDS", "int", 60, _CONVERT, "Time one conversion may take.", minimum=1),
        Key("CONVERT_CONCURRENCY", "int", 2, _CONVERT, "Cold conversions at once, across web processes.", minimum=1),
        Key("CONVERT_WARM", "bool", True, _CONVERT, "Use the warm engine (`manage.py convert_engine`) first."),
        Key("CONVERT_WARM_POOLS", "str", "html5:math:math:pmml=2, html5:fragment:fragment=1,"
            " html5:document:document=2", _CONVERT, "Its pools at start (each server ~150 MB)."),
        Key("CONVERT_ENGINE_SOCKET", "file", Derived("`var/run/convert-engine.sock`",
            lambda v: v["VAR_DIR"] / "run" / "convert-engine.sock"), _CONVERT,
            "Where the engine answers (at most 107 bytes)."),
        Key("CONVERT_WARM_ON_DEMAND", "int", 1, _CONVERT, "Servers of a pool started on demand.", minimum=1),
        Key("CONVERT_WARM_MAX_POOLS", "int", 6, _CONVERT, "Pools at most.", minimum=1),
        Key("CONVERT_WARM_CONCURRENCY", "int", 4, _CONVERT, "Warm requests at once (beyond: 503).", minimum=1),
        Key("CONVERT_WARM_WAIT_SECONDS", "int", 1, _CONVERT, "Wait for a free server before a cold conversion.",
            minimum=0),
        Key("JOB_STALL_SECONDS", "int", 120, _JOBS, "An active job with no sign of life for longer is shown as"
            " stalled.", minimum=1, maximum=7 * 86400, name="jobs.stall_seconds", live=True),
        Key("JOB_SWEEP_SECONDS", "int", 60, _JOBS, "How often beat looks for jobs of dead workers and resends lost"
            " ones.", minimum=5, maximum=86400, name="beat.job_sweep_seconds"),
        Key("MAX_REPORT_PAGE_SIZE", "int", 1000, _JOBS, "Most rows a report page may ask for.",
            minimum=1, maximum=100_000, name="reports.page_size_max", live=True),
        Key("MAX_REPORT_OFFSET", "int", 100_000, _JOBS, "Deepest row offset a report page may ask for.",
            minimum=0, maximum=100_000_000, name="reports.offset_max", live=True),
        Key("REPORT_BUILD_BUDGET_MS", "int", 3000, _JOBS, "Time a page may build a missing rollup slice.", minimum=10),
        Key("REPORT_REFRESH_SECONDS", "int", 900, _JOBS, "How often beat rebuilds every report rollup slice.",
            minimum=10, maximum=7 * 86400, name="beat.report_refresh_seconds"),
    ]
}  # fmt: skip


def _typed(key: Key, value: Any) -> Any:
    """A default as the setting holds it."""
    if key.kind == "path":
        return Path(value).resolve()
    if key.kind == "file":
        return Path(value)
    if key.kind == "paths":
        return [Path(item).resolve() for item in value]
    return value


def _given(key: Key) -> Any:
    """The value the environment gives a key whose variable is set (each reader refuses a bad one)."""
    name = key.env
    if key.kind == "int":
        return env_int(name, 0, minimum=key.minimum, maximum=key.maximum)
    if key.kind == "bool":
        return env_bool(name, False)
    if key.kind == "choice":
        return env_choice(name, "", choices=key.choices)
    if key.kind == "list":
        return env_list(name, [], separator=key.separator)
    if key.kind == "paths":
        return _typed(key, env_list(name, [], separator=key.separator))
    if key.kind == "roots":
        return env_roots(name)
    return _typed(key, env_str(name))


def value(key: Key, values: Mapping[str, Any]) -> Any:
    """The key's value from the environment, else its default (a Derived one from `values`, by setting)."""
    if env_str(key.env) is None:
        default = key.default.compute(values) if isinstance(key.default, Derived) else key.default
        result = _typed(key, default)
    else:
        result = _given(key)
    if key.check is not None:
        key.check(result)
    return result


def read() -> dict[str, Any]:
    """Every declared key's value, by its setting's name, in the order declared."""
    values: dict[str, Any] = {}
    for key in DECLARED.values():
        values[key.setting] = value(key, values)
        if key.env == "VAR_DIR":
            values["VAR_DIR"].mkdir(parents=True, exist_ok=True)
    return values


# --- docs/configuration.md ---

_INTRO = """# Configuration

Every key is declared once, in `config/keys.py`; this page is generated from it (`python -m config.keys >
docs/configuration.md`; tests/config/test_keys.py fails when they differ). A value the service cannot use
(`DEBUG=yes`, a number out of its range) stops start-up with a message naming it. `NAME_FILE` may name a
file holding `NAME`'s value. Lists are comma-separated, paths `:`-separated. A key with a dotted name may be
set at run time; *live*: running processes take a change within about 2 s, else at their next start.
"""

_RUN_TIME = """## Configuration at run time

`GET /api/config` (token; screen `/config`) lists each key with its value, its source (`default`,
`environment`, `api`), the value the answering process runs with, whether they differ until a restart
(`restart_pending`) and its description; the database password is masked, tokens are a count.
`PUT /api/config` deep-merges a partial JSON object (`{"dispatcher": {"max_in_flight": 500}}`; lists are
replaced, `null` resets to the environment's value), refuses the whole change when one key is wrong (400
naming it), stores and journals it, and lists the keys that need a restart. The `/config` screen sets or
resets one key at a time the same way. Each process reads the stored values once, as its apps become ready
(`ops/apps.py`); loading the settings opens no connection. The database URL is set in the environment alone.

`manage.py worker` reads the `conversion.*` limits at its start (`python -m conversion.worker` takes them as
options). See also [cost-and-schedule](decisions/cost-and-schedule.md) and
[container-sandbox](decisions/container-sandbox.md).

```sh
.venv/bin/python manage.py config get [dispatcher.max_in_flight]
.venv/bin/python manage.py config set dispatcher.max_in_flight=500 'directories.corpus_roots=["/srv/a","/srv/b"]'
.venv/bin/python manage.py config set pool.max=16    # prints: restart needed for: pool.max
```

## Against external PostgreSQL and Redis

Set `DATABASE_URL=postgresql://user:pass@host:5432/name` (a socket directory as `?host=/path`) and
`REDIS_URL=redis://host:6379/0`, then `make run`. The database must exist (PostgreSQL 15 or newer); `up`
applies the migrations.
"""


def shown_default(key: Key) -> str:
    """A key's default as the doc shows it."""
    if key.shown is not None:
        return key.shown
    if isinstance(key.default, Derived):
        return key.default.shown
    if isinstance(key.default, bool):
        return f"`{str(key.default).lower()}`"
    if isinstance(key.default, list):
        return f"`{key.separator.join(key.default)}`" if key.default else "none"
    return f"`{key.default}`"


def _bounds(key: Key) -> str:
    if key.kind == "choice":
        return " / ".join(f"`{choice}`" for choice in key.choices)
    if key.minimum is None:
        return ""
    return f"{key.minimum}..{key.maximum}" if key.maximum is not None else f"≥ {key.minimum}"


def _run_time(key: Key) -> str:
    if key.name is None or not key.settable:
        return ""
    return f"`{key.name}`" + (" live" if key.live else "")


def doc() -> str:
    """docs/configuration.md, from the declaration."""
    lines = [_INTRO, "## Environment variables", ""]
    groups: dict[str, list[Key]] = {}
    for key in DECLARED.values():
        groups.setdefault(key.group, []).append(key)
    for group, keys in groups.items():
        lines += [f"### {group}", "", "| variable | default | meaning |", "|---|---|---|"]
        for key in keys:
            notes = "; ".join(note for note in (_bounds(key), _run_time(key)) if note)
            meaning = key.description + (f" ({notes})" if notes else "")
            lines.append(f"| `{key.env}` | {shown_default(key)} | {meaning} |")
        lines.append("")
    return "\n".join(lines) + "\n" + _RUN_TIME


if __name__ == "__main__":
    sys.stdout.write(doc())
