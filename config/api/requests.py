"""What the API reads off a request before any app is asked: where the service token travels and the
client's address (the peer's, or the one a trusted proxy forwarded)."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest
from rest_framework.request import Request

from config.env import trusted_proxies

TOKEN_HEADER = "X-Service-Token"
TOKEN_QUERY = "token"


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    return address is not None and any(
        address in network for network in trusted_proxies(tuple(settings.TRUSTED_PROXIES))
    )


def client_address(request: Request | HttpRequest) -> str:
    """The client's address, as the failure limit and the screen sessions see it: the peer's own, unless
    the peer is one of TRUSTED_PROXIES. Then it is the nearest address of `X-Forwarded-For` (read from
    the right, each proxy appending the address it was reached from) that is not a trusted proxy; a
    malformed entry there stops the walk at the last trusted hop. An untrusted peer's header is
    ignored, so a forged one changes nothing."""
    peer = request.META.get("REMOTE_ADDR") or "unknown"
    if not _trusted(_address(peer)):
        return peer
    hops = [hop for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    nearest = peer
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            return nearest
        nearest = str(address)
        if not _trusted(address):
            return nearest
    return nearest


def raw_token(request: Request) -> str:
    return request.headers.get(TOKEN_HEADER) or request.query_params.get(TOKEN_QUERY) or ""
