"""Writes on tokens and the journal. Every write action journals itself: `journaled` decorates it with
its name from accounts.journal.Action and records one entry per call, with its outcome, whoever calls it
(an API view, a screen, a command, a job, a shell); audit_record is the journal's one writer."""

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
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.http import QueryDict
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.serializers import BaseSerializer

from accounts.journal import Action
from accounts.models import ApiToken, AuditEntry, ScreenSession
from accounts.queries import TOKEN_PREFIX, screen_session_get, token_digest
from config.errors import BadRequest, NotFound, ServiceError
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
F = TypeVar("F", bound=Callable[..., Any])
Target = str | Callable[[dict[str, Any]], str]

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


class _Known(dict):
    """Template values: an argument not (yet) known is empty."""

    def __missing__(self, key: str) -> str:
        return ""


_current: ContextVar[_Call | None] = ContextVar("journal_call", default=None)


def journaled(
    name: Action, *, target: Target = "", actor: str = "actor", secret_input: bool = False
) -> Callable[[F], F]:
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

    def decorate(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args: Any, submitted: Any = None, **kwargs: Any) -> Any:
            if _current.get() is not None:
                return function(*args, **kwargs, **(_checked(submitted, {}) if submitted is not None else {}))
            call = _Call(name, target, actor, secret_input, _arguments(signature, args, kwargs))
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

        wrapper.journal_name = name  # type: ignore[attr-defined]  (tests find every journaled action by it)
        return wrapper  # type: ignore[return-value]

    return decorate


def journal_note(**values: Any) -> None:
    """Add what a journaled action learns as it runs (a token's prefix, what a prune removed) to its entry."""
    call = _current.get()
    if call is not None:
        call.notes.update(values)


def _arguments(signature: inspect.Signature, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the caller passed them, keyword arguments (**fields) flattened in."""
    bound = signature.bind_partial(*args, **kwargs)
    arguments: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        if signature.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value)
        else:
            arguments[key] = value
    return arguments


def _checked(submitted: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The submitted input's fields, checked; `arguments` hold its fields as sent until the check passes."""
    serializer = submitted if isinstance(submitted, BaseSerializer) else submitted()
    raw = getattr(serializer, "initial_data", None)
    sent: dict[str, Any] = {}
    if isinstance(raw, QueryDict):  # a form: a field given twice is a list
        sent = {
            key: raw.getlist(key) if len(raw.getlist(key)) > 1 else raw[key] for key in serializer.fields if key in raw
        }
    elif isinstance(raw, Mapping):
        sent = {key: raw[key] for key in serializer.fields if key in raw}
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
    tokens = tokens.filter(actor=actor) if actor else tokens.filter(prefix=prefix[:12])
    count = tokens.update(revoked_at=timezone.now())
    if count == 0:
        raise NotFound(f"No active token for {'actor ' + actor if actor else 'prefix ' + prefix}.")
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
