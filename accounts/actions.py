"""Writes on tokens and the journal. Every authenticated write is journaled through journaled() (screens,
commands, token actions) or, for the API, by TokenApiView through audit_record; both record the outcome
the same way, under a name from accounts.journal.Action."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from accounts.journal import Action
from accounts.models import ApiToken, AuditEntry, ScreenSession
from accounts.queries import TOKEN_PREFIX, screen_session_get, token_digest
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
    status_code: int | None = None,
    title: str = "",
) -> AuditEntry:
    """Append one journal entry; its outcome is "ok" below status 400, else the status and its title.
    Secrets in the parameters are masked, oversized values cut."""
    outcome = "ok" if status_code is None or status_code < 400 else f"{status_code} {title}".strip()
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


def token_create(*, actor: str, created_by: str, staff: bool = False) -> tuple[ApiToken, str]:
    """Issue a new token for `actor`; the raw token is returned once and never stored. `staff` also lets
    the actor's screen user into the admin-only screens (the retention screen)."""
    if not _ACTOR_NAME.match(actor):
        raise BadRequest(
            "An actor name is 1-100 characters of letters, digits and . _ @ : - and starts with a letter or digit."
        )  # before the journal: a name that is no actor name is not written into it either
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with journaled(actor=created_by, action=Action.TOKEN_CREATE, target=actor) as params:
        token = ApiToken.objects.create(actor=actor, prefix=raw[:12], digest=token_digest(raw))
        params["prefix"] = token.prefix
        if staff:  # the user the sign-in creates for this actor (accounts.views.login_view)
            get_user_model().objects.update_or_create(username=actor, defaults={"is_staff": True})
            params["staff"] = True
    return token, raw


def token_revoke(*, revoked_by: str, actor: str | None = None, prefix: str | None = None) -> int:
    """Revoke every active token of an actor, or the one token with a prefix; returns how many."""
    if bool(actor) == bool(prefix):
        raise BadRequest("Name either an actor or a token prefix to revoke.")
    tokens = ApiToken.objects.filter(revoked_at__isnull=True)
    tokens = tokens.filter(actor=actor) if actor else tokens.filter(prefix=prefix[:12])
    with journaled(actor=revoked_by, action=Action.TOKEN_REVOKE, target=actor or prefix or "") as params:
        count = tokens.update(revoked_at=timezone.now())
        if count == 0:
            raise NotFound(f"No active token for {'actor ' + actor if actor else 'prefix ' + prefix}.")
        params["count"] = count
    return count


def token_touch(token: ApiToken) -> None:
    """Record use at most once a minute, so reads do not turn into a write per request."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


@contextmanager
def journaled(
    *, actor: str, action: Action, target: str = "", params: dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Journal a write made outside the API (screens, commands, token actions) with its outcome, failures
    included. Yields the parameters to record, so the write can add what it learns (a token's prefix)."""
    recorded = dict(params or {})
    try:
        yield recorded
    except ServiceError as exc:
        audit_record(
            actor=actor, action=action, target=target, params=recorded, status_code=exc.status, title=exc.title
        )
        raise
    audit_record(actor=actor, action=action, target=target, params=recorded)


# --- screen sessions ---
SESSION_TOUCH_SECONDS = 60
_touched: dict[str, float] = {}  # session key -> monotonic time this process last wrote its last-seen time
_TOUCHED_MAX = 10_000


def screen_session_start(*, session_key: str, actor: str, client_address: str) -> ScreenSession:
    """Record a sign-in; rows of sessions that ended without a sign-out (expired, flushed) go at the same time."""
    now = timezone.now()
    ScreenSession.objects.exclude(
        session_key__in=Session.objects.filter(expire_date__gt=now).values("session_key")
    ).delete()
    session, _ = ScreenSession.objects.update_or_create(
        session_key=session_key,
        defaults={"actor": actor[:100], "client_address": client_address[:100], "started_at": now, "last_seen_at": now},
    )
    return session


def screen_session_touch(session_key: str) -> None:
    """Move a session's last-seen time forward, at most once a minute: a process remembers when it last
    wrote (no query in between) and the update only matches a row last seen over a minute ago."""
    clock = time.monotonic()
    last = _touched.get(session_key)
    if last is not None and clock - last < SESSION_TOUCH_SECONDS:
        return
    if len(_touched) >= _TOUCHED_MAX:
        _touched.clear()
    _touched[session_key] = clock
    now = timezone.now()
    ScreenSession.objects.filter(
        session_key=session_key, last_seen_at__lt=now - timedelta(seconds=SESSION_TOUCH_SECONDS)
    ).update(last_seen_at=now)


def screen_session_end(session_key: str) -> None:
    """A sign-out: the session's record goes with it."""
    ScreenSession.objects.filter(session_key=session_key).delete()
    _touched.pop(session_key, None)


def screen_session_revoke(session_id: int) -> ScreenSession:
    """End an active screen session at once: its Django session row is deleted, so the browser's next
    request is signed out. Unknown or already ended: NotFound."""
    with transaction.atomic():
        session = screen_session_get(session_id)
        Session.objects.filter(session_key=session.session_key).delete()
        ScreenSession.objects.filter(pk=session.pk).delete()
    _touched.pop(session.session_key, None)
    return session
