"""Reads of tokens, of the journal, of the screen sessions and of passkeys, shared by the API, the screens and
the commands."""

from __future__ import annotations

import hashlib
import hmac

from django.contrib.sessions.models import Session
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry, Passkey, ScreenSession
from config.errors import NotFound

TOKEN_PREFIX = "ccs_"
_MAX_TOKEN_LENGTH = 200


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_verify(raw: str) -> ApiToken | None:
    """Return the active token matching `raw`, comparing digests in constant time."""
    if not raw or len(raw) > _MAX_TOKEN_LENGTH or not raw.startswith(TOKEN_PREFIX):
        return None
    digest = token_digest(raw)
    for candidate in ApiToken.objects.filter(prefix=raw[:12], revoked_at__isnull=True):
        if hmac.compare_digest(candidate.digest, digest):
            return candidate
    return None


def token_list(*, actor: str | None = None, include_revoked: bool = False) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.all()
    if actor:
        tokens = tokens.filter(actor=actor)
    if not include_revoked:
        tokens = tokens.filter(revoked_at__isnull=True)
    return tokens


def audit_list(*, actor: str | None = None, action: str | None = None, limit: int = 100) -> QuerySet[AuditEntry]:
    """Newest journal entries first, optionally narrowed to one actor or action."""
    entries = AuditEntry.objects.all()
    if actor:
        entries = entries.filter(actor=actor)
    if action:
        entries = entries.filter(action=action)
    return entries.order_by("-created_at", "-id")[:limit]


def screen_session_list() -> QuerySet[ScreenSession]:
    """The screen sessions still alive (their Django session exists and has not expired), most recently
    seen first, each with its expiry."""
    live = Session.objects.filter(session_key=OuterRef("session_key"), expire_date__gt=timezone.now())
    return ScreenSession.objects.annotate(expires_at=Subquery(live.values("expire_date")[:1])).filter(
        expires_at__isnull=False
    )


def screen_session_get(session_id: int) -> ScreenSession:
    session = screen_session_list().filter(pk=session_id).first()
    if session is None:
        raise NotFound(f"No active screen session {session_id}.")
    return session


# --- passkeys ---
def passkey_list(actor: str) -> QuerySet[Passkey]:
    """The active passkeys of an actor, newest first."""
    return Passkey.objects.filter(actor=actor, revoked_at__isnull=True)


def passkey_get(passkey_id: int, *, actor: str) -> Passkey:
    """One active passkey of the actor; another actor's, a revoked or an unknown one: NotFound."""
    passkey = passkey_list(actor).filter(pk=passkey_id).first()
    if passkey is None:
        raise NotFound(f"No active passkey {passkey_id} of {actor}.")
    return passkey


def passkey_by_credential(credential_id: str) -> Passkey | None:
    """The passkey, active or revoked, of a credential id (base64url); None when none was registered."""
    return Passkey.objects.filter(credential_id=credential_id).first()


def passkey_signs_in(passkey_id: int) -> bool:
    """Whether a passkey still opens (and keeps open) a screen session: it is not revoked, and its actor
    holds an active token, so revoking an actor's tokens shuts the actor out of the screens altogether."""
    active_actors = ApiToken.objects.filter(revoked_at__isnull=True).values("actor")
    return Passkey.objects.filter(pk=passkey_id, revoked_at__isnull=True, actor__in=active_actors).exists()
