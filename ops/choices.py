"""The vocabularies of ops, each spelled here once: a health check's status, the database's readiness, the
log levels the log screen filters by, and where a configuration value comes from."""

from __future__ import annotations

from django.db import models


class HealthStatus(models.TextChoices):
    """A health check's status, mildest first (the overall status is the worst check's)."""

    OK = "ok"
    WARNING = "warning"
    PROBLEM = "problem"


class Readiness(models.TextChoices):
    """GET /api/ready: whether the database answers."""

    OK = "ok"
    UNAVAILABLE = "unavailable"


class LogLevel(models.TextChoices):
    """The minimum level of GET /api/logs and the log screen (Python's logging levels)."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class ConfigSource(models.TextChoices):
    """Where a configuration key's value comes from (GET /api/config)."""

    DEFAULT = "default"
    ENVIRONMENT = "environment"
    API = "api"
    DATABASE = "database"
