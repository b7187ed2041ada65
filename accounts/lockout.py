"""A limit on failed authentication per client address: after AUTH_FAILURE_LIMIT wrong tokens within
AUTH_FAILURE_WINDOW_SECONDS the address gets 429 until the window ends. The count lives in Redis, so
every web process (and every machine of the web tier) shares it."""

from __future__ import annotations

import logging
from functools import lru_cache

import redis
from django.conf import settings

from accounts.models import ApiToken
from accounts.queries import token_verify
from config.errors import TooManyRequests

logger = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def redis_for(url: str) -> redis.Redis:
    # Short timeouts: a slow Redis must not hold up every authenticated request.
    return redis.Redis.from_url(url.replace("redis+socket://", "unix://"), socket_connect_timeout=1, socket_timeout=1)


def _key(address: str) -> str:
    return f"{settings.AUTH_FAILURE_KEY_PREFIX}{address}"


def lockout_remaining(address: str) -> int:
    """Seconds until `address` may try again; 0 when it is not locked out (or Redis cannot say)."""
    try:
        with redis_for(settings.REDIS_URL).pipeline(transaction=False) as pipe:
            count, ttl = pipe.get(_key(address)).ttl(_key(address)).execute()
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
            pipe.set(key, 0, ex=settings.AUTH_FAILURE_WINDOW_SECONDS, nx=True).incr(key).execute()
    except redis.RedisError as exc:
        logger.warning("auth failure limit unavailable: %s", exc)


def token_check(raw: str, address: str) -> ApiToken | None:
    """`token_verify` behind the failure limit: while `address` is locked out every token is refused
    unread (TooManyRequests), so guessing cannot go on; a wrong token counts as a failure."""
    remaining = lockout_remaining(address)
    if remaining:
        raise TooManyRequests(
            f"Too many failed authentications from this address; retry in {remaining} s.", retry_after=remaining
        )
    token = token_verify(raw)
    if token is None:
        failure_record(address)
    return token
