"""Writes on tokens, screen sessions, passkeys and the journal. Every write action journals itself:
`journaled` decorates it with its name from accounts.choices.Action and records one entry per call, with its
outcome, whoever calls it (an API view, a screen, a command, a job, a shell); audit_record is the journal's
one writer."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import secrets
import string
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date, timedelta
from http import HTTPStatus
from typing import Any, Generic, ParamSpec, TypeVar, overload

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.http import QueryDict
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.serializers import Serializer
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url

from accounts.choices import Action, ChallengePurpose
from accounts.models import ApiToken, AuditEntry, Passkey, PasskeyChallenge, ScreenSession
from accounts.passkeys import (
    answered_challenge,
    authentication_parsed,
    authentication_verified,
    credential_id_of,
    registration_parsed,
    registration_verified,
)
from accounts.queries import (
    TOKEN_PREFIX,
    passkey_by_credential,
    passkey_get,
    passkey_signs_in,
    screen_session_get,
    token_digest,
)
from config.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceError
from config.logs import request_id_var
from config.screens import validated

logger = logging.getLogger(__name__)

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
    if isinstance(value, date):  # a datetime too
        return value.isoformat()
    return _clean(str(value))


# --- journaled actions ---
P = ParamSpec("P")
R = TypeVar("R")
Target = str | Callable[[dict[str, Any]], str]
# A caller's unchecked input: a serializer, or a function returning one when a lookup must answer first.
Submitted = Serializer[Any] | Callable[[], Serializer[Any]]

# How a caller runs the job an action starts (now, or by a message), not what it asked for.
_NOT_RECORDED = {"send"}


@dataclass
class JournalRequest:
    """An API request around the write it makes (accounts.api_base.TokenApiView): the entry records the
    request's query and body as sent, and `answered` puts the HTTP status of a success on it."""

    params: Callable[[], dict[str, Any]]
    entry: AuditEntry | None = None

    def answered(self, status_code: int) -> None:
        if self.entry is None or self.entry.status_code is not None or status_code >= 400:
            return
        try:
            AuditEntry.objects.filter(pk=self.entry.pk).update(status_code=status_code)
        except Exception:  # the write is done: a journal failure must not turn it into an error
            logger.exception("could not note status %s on journal entry %s", status_code, self.entry.pk)


_request: ContextVar[JournalRequest | None] = ContextVar("journal_request", default=None)


@contextmanager
def journal_request(params: Callable[[], dict[str, Any]]) -> Iterator[JournalRequest]:
    """Mark an API request: the journaled action it calls records `params()`, what the caller sent."""
    request = JournalRequest(params)
    token = _request.set(request)
    try:
        yield request
    finally:
        _request.reset(token)


@dataclass
class _Call:
    """One journaled call as it goes: its arguments (the submitted fields once checked, as sent until
    then) and what the action notes (journal_note)."""

    name: Action
    target: Target
    actor: str
    secret_input: bool
    arguments: dict[str, Any]
    notes: dict[str, Any] = field(default_factory=dict)

    def record(self, exc: Exception | None = None) -> AuditEntry:
        status_code: int | None
        if isinstance(exc, ServiceError):
            status_code, title = exc.status, exc.title
        elif isinstance(exc, APIException):  # a body the API could not parse, read inside the attempt
            status_code, title = exc.status_code, HTTPStatus(exc.status_code).phrase.capitalize()
        else:
            status_code, title = (None, "") if exc is None else (500, "Internal server error")
        return audit_record(
            actor=str(self.arguments.get(self.actor) or ""),
            action=self.name,
            target=self._target(),
            params=self._params(exc),
            status_code=status_code,
            title=title,
        )

    def _target(self) -> str:
        if callable(self.target):
            return self.target(self.arguments)
        return self.target.format_map(_Known({k: "" if v is None else v for k, v in self.arguments.items()}))

    def _params(self, exc: Exception | None) -> dict[str, Any]:
        if self.secret_input:
            if isinstance(exc, ServiceError):
                return {**self.notes, "refused": sorted(exc.errors) if isinstance(exc.errors, dict) else []}
            return dict(self.notes)
        request = _request.get()
        if request is not None:
            return {**request.params(), **self.notes}
        named = {self.actor, *_NOT_RECORDED}
        if isinstance(self.target, str):
            named |= {name for _, name, _, _ in string.Formatter().parse(self.target) if name}
        return {**{k: v for k, v in self.arguments.items() if k not in named}, **self.notes}


class _Known(dict[str, object]):
    """Template values: an argument not (yet) known is empty."""

    def __missing__(self, key: str) -> str:
        return ""


_current: ContextVar[_Call | None] = ContextVar("journal_call", default=None)


def journaled(
    name: Action, *, target: Target = "", actor: str = "actor", secret_input: bool = False
) -> Callable[[Callable[P, R]], JournaledAction[P, R]]:
    """Journal every call of a write action under `name`, whoever calls it. The action runs in one
    transaction that also writes its entry (outcome "ok"); a refusal (a ServiceError) rolls the write back
    and is journaled after the rollback with its status and title, a crash as 500.

    `target` is a template of the action's arguments ("{corpus_name}/{service_name}") or a function of
    them; `actor` the argument that says who acts. The entry's parameters are the other arguments (but
    `send`), or on the API the request's query and body as sent, plus what the action notes. With
    `secret_input` (a value could be a secret) they are only the notes, and of a refusal the names of the
    refused fields.

    A caller hands its unchecked input as `submitted=`: a serializer, or a function returning one when a
    lookup must answer first. It is checked inside the attempt and its fields become arguments, so a
    refused input is journaled like a refused action. A journaled action called by another one is part
    of that one's entry."""

    def decorate(function: Callable[P, R]) -> JournaledAction[P, R]:
        return JournaledAction(function, name, target=target, actor=actor, secret_input=secret_input)

    return decorate


class JournaledAction(Generic[P, R]):
    """A write action that journals every call (journaled). Called with its own arguments, it is checked
    as the function it wraps; called with `submitted=`, the input's fields stand for the arguments it
    leaves out. `journal_name` lets the tests find every journaled action."""

    def __init__(
        self, function: Callable[P, R], name: Action, *, target: Target, actor: str, secret_input: bool
    ) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.signature = inspect.signature(function)
        self.journal_name = name
        self.target = target
        self.actor = actor
        self.secret_input = secret_input

    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @overload
    def __call__(self, *args: Any, submitted: Submitted, **kwargs: Any) -> R: ...

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        submitted: Submitted | None = kwargs.pop("submitted", None)
        function: Callable[..., R] = self.function
        if _current.get() is not None:
            return function(*args, **kwargs, **(_checked(submitted, {}) if submitted is not None else {}))
        call = _Call(
            self.journal_name, self.target, self.actor, self.secret_input, _arguments(self.signature, args, kwargs)
        )
        token = _current.set(call)
        try:
            with transaction.atomic():
                if submitted is not None:
                    kwargs = {**kwargs, **_checked(submitted, call.arguments)}
                result = function(*args, **kwargs)
                entry = call.record()
        except Exception as exc:
            _refusal_record(call, exc)
            raise
        finally:
            _current.reset(token)
        request = _request.get()
        if request is not None:
            request.entry = entry
        return result


def journal_note(**values: Any) -> None:
    """Add what a journaled action learns as it runs (a token's prefix, what a prune removed) to its entry."""
    call = _current.get()
    if call is not None:
        call.notes.update(values)


def _arguments(signature: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the caller passed them, keyword arguments (**fields) flattened in."""
    bound = signature.bind_partial(*args, **kwargs)
    arguments: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        if signature.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value)
        else:
            arguments[key] = value
    return arguments


def _checked(submitted: Submitted, arguments: dict[str, Any]) -> dict[str, Any]:
    """The submitted input's fields, checked; `arguments` hold its fields as sent until the check passes."""
    serializer = submitted if isinstance(submitted, Serializer) else submitted()
    raw = getattr(serializer, "initial_data", None)
    sent: dict[str, Any] = {}
    if isinstance(raw, QueryDict):  # a form: a field given twice is a list
        sent = {
            key: raw.getlist(key) if len(raw.getlist(key)) > 1 else raw[key]
            for key in serializer.fields.keys()  # noqa: SIM118 (the stubs iterate a BindingDict as its fields)
            if key in raw
        }
    elif isinstance(raw, Mapping):
        sent = {key: raw[key] for key in serializer.fields.keys() if key in raw}  # noqa: SIM118 (as above)
    arguments.update(sent)
    values = dict(validated(serializer))
    for key in sent:
        arguments.pop(key, None)
    arguments.update(values)
    return values


def _refusal_record(call: _Call, exc: Exception) -> None:
    try:
        with transaction.atomic():  # a savepoint where a transaction is open: its failure spoils nothing
            call.record(exc)
    except Exception:  # never hide the refusal itself
        logger.exception("could not journal the failed %s", call.name)


def token_create(*, actor: str, created_by: str, staff: bool = False) -> tuple[ApiToken, str]:
    """Issue a new token for `actor`; the raw token is returned once and never stored. `staff` also lets
    the actor's screen user into the admin-only screens (the retention screen)."""
    if not _ACTOR_NAME.match(actor):
        raise BadRequest(
            "An actor name is 1-100 characters of letters, digits and . _ @ : - and starts with a letter or digit."
        )  # before the journal: a name that is no actor name is not written into it either
    return _token_issue(actor=actor, created_by=created_by, staff=staff)


@journaled(Action.TOKEN_CREATE, target="{actor}", actor="created_by")
def _token_issue(*, actor: str, created_by: str, staff: bool) -> tuple[ApiToken, str]:
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(actor=actor, prefix=raw[:12], digest=token_digest(raw))
    journal_note(prefix=token.prefix)
    if staff:  # the user the sign-in creates for this actor (accounts.views.login_view)
        get_user_model().objects.update_or_create(username=actor, defaults={"is_staff": True})
    return token, raw


@journaled(Action.TOKEN_REVOKE, target=lambda a: a.get("actor") or a.get("prefix") or "", actor="revoked_by")
def token_revoke(*, revoked_by: str, actor: str | None = None, prefix: str | None = None) -> int:
    """Revoke every active token of an actor, or the one token with a prefix; returns how many."""
    if bool(actor) == bool(prefix):
        raise BadRequest("Name either an actor or a token prefix to revoke.")
    tokens = ApiToken.objects.filter(revoked_at__isnull=True)
    tokens = tokens.filter(actor=actor) if actor else tokens.filter(prefix=(prefix or "")[:12])
    count = tokens.update(revoked_at=timezone.now())
    if count == 0:
        raise NotFound(f"No active token for {f'actor {actor}' if actor else f'prefix {prefix}'}.")
    journal_note(count=count)
    return count


def token_touch(token: ApiToken) -> None:
    """Record use at most once a minute, so reads do not turn into a write per request."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


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


@journaled(Action.SESSION_REVOKE, target="{session_id}")
def screen_session_revoke(session_id: int, *, actor: str) -> ScreenSession:
    """End an active screen session at once: its Django session row is deleted, so the browser's next
    request is signed out. Unknown or already ended: NotFound."""
    session = screen_session_get(session_id)
    Session.objects.filter(session_key=session.session_key).delete()
    ScreenSession.objects.filter(pk=session.pk).delete()
    _touched.pop(session.session_key, None)
    return session


# --- passkeys ---
CHALLENGE_REFUSED = "The passkey challenge has expired or was used already: start again."


def passkey_challenge_issue(*, purpose: str, session_key: str, actor: str = "") -> bytes:
    """A new challenge for one ceremony of the browser whose Django session key is `session_key` (for a
    registration, by `actor`), valid for PASSKEY_CHALLENGE_SECONDS; expired ones go at the same time."""
    now = timezone.now()
    PasskeyChallenge.objects.filter(expires_at__lte=now).delete()
    challenge = secrets.token_bytes(32)
    PasskeyChallenge.objects.create(
        challenge=bytes_to_base64url(challenge),
        purpose=purpose,
        session_key=session_key,
        actor=actor,
        expires_at=now + timedelta(seconds=settings.PASSKEY_CHALLENGE_SECONDS),
    )
    return challenge


def _challenge_use(credential: Any, *, purpose: str, session_key: str, actor: str = "") -> bytes | None:
    """Use up the challenge an answer answers, if it was given to the browser of `session_key` for this purpose
    (and actor) and has not expired: its row is deleted in one statement, so of two answers to it one at most
    gets it, and outside the action's transaction, so it is gone whatever the action then decides. None:
    refused."""
    answered = answered_challenge(credential)
    if answered is None or not session_key:
        return None
    deleted, _ = PasskeyChallenge.objects.filter(
        challenge=answered, purpose=purpose, session_key=session_key, actor=actor, expires_at__gt=timezone.now()
    ).delete()
    return base64url_to_bytes(answered) if deleted else None


@contextmanager
def _refusal_noted() -> Iterator[None]:
    """A refused ceremony's entry says why (its parameters are only what the action notes)."""
    try:
        yield
    except ServiceError as exc:
        journal_note(reason=exc.detail)
        raise


def passkey_register(*, actor: str, credential: Any, session_key: str, submitted: Any) -> Passkey:
    """Register the passkey a browser created (navigator.credentials.create()'s answer, as JSON) for the
    signed-in `actor`, under the name `submitted` gives (PasskeyNameSerializer). The challenge is used up
    first; a refusal of any kind is journaled with its reason."""
    challenge = _challenge_use(credential, purpose=ChallengePurpose.REGISTER, session_key=session_key, actor=actor)
    return _passkey_add(actor=actor, credential=credential, challenge=challenge, submitted=submitted)


@journaled(Action.PASSKEY_REGISTER, target="{name}", secret_input=True)
def _passkey_add(*, actor: str, credential: Any, challenge: bytes | None, name: str) -> Passkey:
    with _refusal_noted():
        if challenge is None:
            raise BadRequest(CHALLENGE_REFUSED)
        parsed = registration_parsed(credential)
        verified = registration_verified(parsed, challenge)
        credential_id = bytes_to_base64url(verified.credential_id)
        if Passkey.objects.filter(credential_id=credential_id).exists():
            raise Conflict("This passkey is registered already.")
        passkey = Passkey.objects.create(
            actor=actor,
            name=name,
            credential_id=credential_id,
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            transports=[transport.value for transport in parsed.response.transports or []],
        )
    journal_note(passkey=passkey.pk, name=name)
    return passkey


def passkey_sign_in(*, credential: Any, session_key: str) -> Passkey:
    """Check a browser's answer to navigator.credentials.get() (as JSON) for a sign-in: the challenge the
    browser's session was given, a registered passkey that still signs in (accounts.queries.passkey_signs_in), its
    signature. Returns the passkey, its counter and last use updated; the caller starts the session. Every
    attempt is journaled under the passkey's actor (empty for an unknown passkey)."""
    challenge = _challenge_use(credential, purpose=ChallengePurpose.SIGN_IN, session_key=session_key)
    passkey = passkey_by_credential(credential_id_of(credential) or "")
    return _passkey_use(
        actor=passkey.actor if passkey else "", passkey=passkey, credential=credential, challenge=challenge
    )


@journaled(Action.PASSKEY_SIGN_IN, target=lambda a: str(a["passkey"].pk) if a.get("passkey") else "", secret_input=True)
def _passkey_use(*, actor: str, passkey: Passkey | None, credential: Any, challenge: bytes | None) -> Passkey:
    with _refusal_noted():
        if challenge is None:
            raise BadRequest(CHALLENGE_REFUSED)
        if passkey is None:
            raise Forbidden("This passkey is not registered here.")
        if not passkey_signs_in(passkey.pk):
            if passkey.revoked_at is not None:
                raise Forbidden("This passkey has been revoked.")
            raise Forbidden(f"{passkey.actor} holds no active token, so their passkeys sign no one in.")
        verified = authentication_verified(
            authentication_parsed(credential),
            challenge,
            actor=passkey.actor,
            public_key=bytes(passkey.public_key),
            sign_count=passkey.sign_count,
        )
    passkey.sign_count, passkey.last_used_at = verified.new_sign_count, timezone.now()
    Passkey.objects.filter(pk=passkey.pk).update(sign_count=passkey.sign_count, last_used_at=passkey.last_used_at)
    return passkey


@journaled(Action.PASSKEY_RENAME, target="{passkey_id}")
def passkey_rename(passkey_id: int, *, actor: str, name: str) -> Passkey:
    """Give one of the actor's active passkeys another name."""
    passkey = passkey_get(passkey_id, actor=actor)
    journal_note(was=passkey.name)
    passkey.name = name
    Passkey.objects.filter(pk=passkey.pk).update(name=name)
    return passkey


@journaled(Action.PASSKEY_REVOKE, target="{passkey_id}")
def passkey_revoke(passkey_id: int, *, actor: str) -> Passkey:
    """Revoke one of the actor's active passkeys: it signs no one in again, and the screen sessions it opened
    end at their next request (accounts.middleware)."""
    passkey = passkey_get(passkey_id, actor=actor)
    journal_note(name=passkey.name)
    passkey.revoked_at = timezone.now()
    Passkey.objects.filter(pk=passkey.pk).update(revoked_at=passkey.revoked_at)
    return passkey
