"""A limit on failed authentication per client address: after AUTH_FAILURE_LIMIT wrong tokens within
AUTH_FAILURE_WINDOW_SECONDS, further wrong tokens from the address get 429 until the window ends. A valid
token is always accepted, so a misconfigured client (or anyone sending wrong tokens) sharing an address
with operators locks nobody out. The count lives in Redis, so every web process (and every machine of
the web tier) shares it."""

from __future__ import annotations

import logging
from functools import lru_cache

import redis
from django.conf import settings

from accounts.models import ApiToken
from accounts.queries import token_verify
from config.errors import TooManyRequests
from config.redis_client import redis_client

logger = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def redis_for(url: str) -> redis.Redis:
    # Short timeouts: a slow Redis must not hold up every authenticated request.
    return redis_client(url, socket_connect_timeout=1, socket_timeout=1)


def _key(address: str) -> str:
    return f"{settings.AUTH_FAILURE_KEY_PREFIX}{address}"


def lockout_remaining(address: str) -> int:
    """Seconds until `address` may try again; 0 when it is not locked out (or Redis cannot say)."""
    try:
        with redis_for(settings.REDIS_URL).pipeline(transaction=False) as pipe:
            pipe.get(_key(address))
            pipe.ttl(_key(address))
            count, ttl = pipe.execute()
    except redis.RedisError as exc:  # fail open: the tokens still guard everything, only the limit lapses
        logger.warning("auth failure limit unavailable: %s", exc)
        return 0
    if count is None or int(count) < settings.AUTH_FAILURE_LIMIT:
        return 0
    return max(int(ttl), 1)


def failure_record(address: str) -> None:
    """Count one failed authentication of `address`; the window starts with its first failure."""
    key = _key(address)
    try:
        with redis_for(settings.REDIS_URL).pipeline(transaction=True) as pipe:
            # SET NX EX then INCR in one MULTI: the key can never exist without its expiry.
            pipe.set(key, 0, ex=settings.AUTH_FAILURE_WINDOW_SECONDS, nx=True)
            pipe.incr(key)
            pipe.execute()
    except redis.RedisError as exc:
        logger.warning("auth failure limit unavailable: %s", exc)


def token_check(raw: str, address: str) -> ApiToken | None:
    """`token_verify` behind the failure limit: a valid token is accepted whatever the count; a wrong one
    counts as a failure of `address`, and once the address is at the limit it is refused with
    TooManyRequests (429) instead of None (401)."""
    token = token_verify(raw)
    if token is not None:
        return token
    remaining = lockout_remaining(address)
    if remaining:
        raise TooManyRequests(
            f"Too many failed authentications from this address; retry in {remaining} s.", retry_after=remaining
        )
    failure_record(address)
    return None
