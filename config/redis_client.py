"""Every Redis connection of the project is made here, from one URL in any of the forms that `up` writes or
an operator may set:

- `redis://[:password@]host[:port][/db]` and `rediss://…` (TLS);
- `unix:///path/to/redis.sock[?db=N]` (redis-py's form of a unix socket);
- `redis+socket:///path/to/redis.sock[?virtual_host=N]` (Celery's form, the one `up` writes for the
  embedded Redis).

redis-py knows the first three and Celery (kombu) all but `unix://`, so each consumer gets the URL
translated to its own dialect: `redis_py_url` for direct clients, `celery_url` for the broker.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis

SCHEMES = ("redis", "rediss", "unix", "redis+socket")
_SOCKET_SCHEMES = ("unix", "redis+socket")


class RedisUrlError(ValueError):
    """A Redis URL in none of the forms above."""


def _split(url: str) -> tuple[str, str, dict[str, str]]:
    """(scheme, socket path, query) of a socket URL; RedisUrlError for a URL of no known form."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        shown = f"{parts.scheme}://" if parts.scheme else repr(url[:40])
        raise RedisUrlError(
            f"a Redis URL must start with one of {', '.join(s + '://' for s in SCHEMES)}; this one starts with {shown}"
        )
    if parts.scheme in _SOCKET_SCHEMES and not (parts.netloc + parts.path):
        raise RedisUrlError(f"a {parts.scheme}:// Redis URL must name the socket's path")
    return parts.scheme, parts.netloc + parts.path, dict(parse_qsl(parts.query))


def _socket_url(scheme: str, path: str, query: dict[str, str]) -> str:
    return f"{scheme}://{path}" + (f"?{urlencode(query)}" if query else "")


def redis_py_url(url: str) -> str:
    """The URL as redis-py reads it: a `redis+socket://` socket becomes `unix://`, its database number
    (kombu's `virtual_host`) the `db` parameter."""
    scheme, path, query = _split(url)
    if scheme != "redis+socket":
        return url
    if "virtual_host" in query:
        query["db"] = query.pop("virtual_host").lstrip("/") or "0"
    return _socket_url("unix", path, query)


def celery_url(url: str) -> str:
    """The URL as Celery's broker (kombu) reads it: a `unix://` socket becomes `redis+socket://`, its `db`
    parameter kombu's `virtual_host`."""
    scheme, path, query = _split(url)
    if scheme != "unix":
        return url
    if "db" in query:
        query["virtual_host"] = query.pop("db")
    return _socket_url("redis+socket", path, query)


def redis_client(url: str | None = None, **options: Any) -> redis.Redis:
    """A redis-py client for `url` (default: settings.REDIS_URL), whatever its form; `options` are
    redis.Redis's keyword arguments (timeouts, decode_responses, …)."""
    if url is None:
        from django.conf import settings

        url = settings.REDIS_URL
    return redis.Redis.from_url(redis_py_url(url), **options)
