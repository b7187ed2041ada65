"""Reads about the running system."""

from __future__ import annotations

import logging

from django.db import connection

from conversion.sandbox import problem
from services.queries import conversion_sandbox

logger = logging.getLogger(__name__)


def database_reachable() -> bool:
    """True when the database answers a trivial query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception as exc:
        logger.warning("database not reachable: %s", exc)
        return False


def conversion_sandbox_state() -> str:
    """`bwrap` when conversions run sandboxed, `unavailable` when the sandbox cannot start (conversions
    are refused), `none` when the sandbox is turned off."""
    sandbox = conversion_sandbox()
    if not sandbox.enabled:
        return "none"
    return sandbox.mode if problem(sandbox) is None else "unavailable"


def liveness() -> dict:
    reachable = database_reachable()
    return {
        "status": "ok" if reachable else "unavailable",
        "database": {"reachable": reachable},
        "conversion_sandbox": conversion_sandbox_state(),
    }
