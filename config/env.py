"""Strict readers for settings taken from the environment: a bad value stops start-up loudly."""

from __future__ import annotations

import ipaddress
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, overload
from urllib.parse import parse_qs, unquote, urlsplit


class ConfigError(Exception):
    """A setting in the environment has a value the service cannot use."""


@overload
def env_str(name: str) -> str | None: ...
@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: None) -> str | None: ...


def env_str(name: str, default: str | None = None) -> str | None:
    """Return NAME, or the contents of the file named by NAME_FILE (for secrets), or the default."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{name}_FILE={file_name} cannot be read: {exc.strerror}") from exc
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    """Accept only 'true' or 'false' (any case), so a typo cannot silently flip a switch."""
    value = env_str(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    return lowered == "true"


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Read a whole number, refusing anything else and anything outside the bounds."""
    value = env_str(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from exc
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{name} must be at most {maximum}, not {number}")
    return number


@lru_cache(maxsize=8)
def trusted_proxies(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """TRUSTED_PROXIES as networks: each entry an address (`10.0.0.5`) or a network (`10.0.0.0/8`)."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ConfigError(f"TRUSTED_PROXIES holds {entry!r}, which is neither an address nor a network") from exc
    return tuple(networks)


def env_choice(name: str, default: str, *, choices: tuple[str, ...]) -> str:
    """Read one of a fixed set of words, refusing anything else (no case folding, no guessing)."""
    value = env_str(name)
    if value is None:
        return default
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def env_list(name: str, default: list[str], *, separator: str = ",") -> list[str]:
    """Read a separated list, dropping empty items."""
    value = env_str(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(separator) if item.strip()]


def env_roots(name: str) -> list[Path]:
    """Read `:`-separated absolute directories (none by default), resolved; a relative one, or `/` itself,
    stops start-up."""
    roots = []
    for item in env_list(name, [], separator=":"):
        if not item.startswith("/"):
            raise ConfigError(f"{name} holds {item!r}, which is not an absolute path")
        root = Path(item).resolve()
        if root == Path("/"):
            raise ConfigError(f"{name} cannot hold / itself")
        roots.append(root)
    return roots


def database_config(url: str, *, pool: bool, pool_min: int, pool_max: int, pool_timeout: int) -> dict[str, Any]:
    """Turn a postgres:// URL (host may be a socket directory given as ?host=) into Django's form."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ConfigError(f"DATABASE_URL must start with postgresql://, not {parts.scheme or url!r}")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = query.pop("host", None) or unquote(parts.hostname or "")
    options: dict[str, Any] = dict(query)
    if pool:
        options["pool"] = {"min_size": pool_min, "max_size": pool_max, "timeout": pool_timeout}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": 0,
        # With a pool, the pool checks each connection as it is handed out (a round trip), so one that a
        # restarted or killed server ended is replaced rather than failing the request that got it.
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": f"test_{unquote(parts.path.lstrip('/')) or 'postgres'}"},
    }
