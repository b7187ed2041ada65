"""Writes on tokens and the journal. Every state change of the service is journaled here."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry
from accounts.queries import TOKEN_PREFIX, token_digest
from config.errors import BadRequest, NotFound, ServiceError
from config.logs import request_id_var

_ACTOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,99}$")
_SECRET_KEYS = {"token", "password", "secret"}
_PARAM_VALUE_LIMIT = 1000


def audit_record(
    *,
    actor: str,
    action: str,
    target: str = "",
    params: dict[str, Any] | None = None,
    outcome: str = "ok",
    status_code: int | None = None,
) -> AuditEntry:
    """Append one journal entry; secrets in the parameters are masked, oversized values cut."""
    clean = {_clean(k, 100): ("***" if k.lower() in _SECRET_KEYS else _clean(v)) for k, v in (params or {}).items()}
    return AuditEntry.objects.create(
        actor=actor[:100],
        action=action[:100],
        target=target[:500],
        params=clean,
        outcome=outcome[:200],
        status_code=status_code,
        request_id=request_id_var.get() if request_id_var.get() != "-" else "",
    )


def _clean(value: Any, limit: int = _PARAM_VALUE_LIMIT) -> Any:
    """Make a parameter storable: no NUL characters (PostgreSQL text refuses them), bounded size."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")[:limit]
    if isinstance(value, dict):
        return {_clean(k, 100): _clean(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value[:50]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clean(str(value))


def token_create(*, actor: str, created_by: str) -> tuple[ApiToken, str]:
    """Issue a new token for `actor`; the raw token is returned once and never stored."""
    if not _ACTOR_NAME.match(actor):
        raise BadRequest(
            "An actor name is 1-100 characters of letters, digits and . _ @ : - and starts with a letter or digit."
        )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(actor=actor, prefix=raw[:12], digest=token_digest(raw))
        audit_record(actor=created_by, action="token.create", target=actor, params={"prefix": token.prefix})
    return token, raw


def token_revoke(*, revoked_by: str, actor: str | None = None, prefix: str | None = None) -> int:
    """Revoke every active token of an actor, or the one token with a prefix; returns how many."""
    if bool(actor) == bool(prefix):
        raise BadRequest("Name either an actor or a token prefix to revoke.")
    tokens = ApiToken.objects.filter(revoked_at__isnull=True)
    tokens = tokens.filter(actor=actor) if actor else tokens.filter(prefix=prefix[:12])
    with transaction.atomic():
        count = tokens.update(revoked_at=timezone.now())
        if count == 0:
            raise NotFound(f"No active token for {'actor ' + actor if actor else 'prefix ' + prefix}.")
        audit_record(
            actor=revoked_by,
            action="token.revoke",
            target=actor or prefix or "",
            params={"count": count},
        )
    return count


def token_touch(token: ApiToken) -> None:
    """Record use at most once a minute, so reads do not turn into a write per request."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


@contextmanager
def journaled(*, actor: str, action: str, target: str = "", params: dict[str, Any] | None = None) -> Iterator[None]:
    """Journal a write made outside the API (screens, commands), with its outcome, failures included."""
    try:
        yield
    except ServiceError as exc:
        audit_record(
            actor=actor, action=action, target=target, params=params,
            outcome=f"{exc.status} {exc.title}", status_code=exc.status,
        )  # fmt: skip
        raise
    audit_record(actor=actor, action=action, target=target, params=params, outcome="ok")
