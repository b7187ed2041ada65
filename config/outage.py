"""Whether PostgreSQL and Redis answer now, asked on a connection of the probe's own.

The processes that wait out an outage (the dispatcher's loop, `up`'s supervisor) ask here rather than
through Django: a pooled connection waits for the pool (up to `DB_POOL_TIMEOUT`) while the server is down,
and a probe must answer at once, so the loop around it keeps answering its workers meanwhile.
"""

from __future__ import annotations

import psycopg
import redis
from django.conf import settings

from config.redis_client import redis_client


def database_down(timeout: float = 2.0) -> str | None:
    """None when PostgreSQL (settings.DATABASE_URL) takes a new connection and answers; else why not, in one line."""
    try:
        with psycopg.connect(settings.DATABASE_URL, connect_timeout=max(1, round(timeout))) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL does not answer: {_first_line(exc)}"
    return None


def redis_down(timeout: float = 1.0) -> str | None:
    """None when Redis (settings.REDIS_URL) answers a PING; else why not, in one line."""
    client = redis_client(socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"Redis does not answer: {_first_line(exc)}"
    finally:
        client.close()
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
