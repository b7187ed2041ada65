"""Sign in to the screens with a service token or a passkey (a Django session follows), sign out, the
journal, the signed-in sessions, one's passkeys and the JSON steps of the browser's WebAuthn ceremonies."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from accounts import resources
from accounts.actions import (
    passkey_challenge_issue,
    passkey_register,
    passkey_rename,
    passkey_revoke,
    passkey_sign_in,
    screen_session_end,
    screen_session_revoke,
    screen_session_start,
)
from accounts.choices import ChallengePurpose
from accounts.lockout import token_check
from accounts.middleware import SESSION_PASSKEY_KEY, SESSION_TOKEN_KEY
from accounts.passkeys import authentication_options, registration_options, relying_party_id
from accounts.queries import audit_list, passkey_list, screen_session_list
from accounts.serializers import (
    PasskeyNameSerializer,
    PasskeySerializer,
    ScreenSessionSerializer,
    TokenLoginSerializer,
)
from config.api.errors import problem_json_response
from config.api.requests import client_address
from config.errors import ServiceError, TooManyRequests
from config.middleware import url_without_token
from config.screens import error_page, screen_write, session_key


def _next_url(request: HttpRequest, asked: Any) -> str:
    """The page to go to once signed in: one of this site, never with a token in it (it would be written
    into the sign-in page and the browser's history)."""
    next_url = url_without_token(asked if isinstance(asked, str) and asked else "/corpora")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        return "/corpora"
    return next_url


def _session_start(request: HttpRequest, actor: str, *, key: str, value: int) -> None:
    """Sign `actor` in: a Django session that remembers what it was opened with (`key`: a token's or a
    passkey's id, which accounts.middleware checks on every request), recorded as a screen session."""
    user, _ = get_user_model().objects.get_or_create(username=actor)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    for other in (SESSION_TOKEN_KEY, SESSION_PASSKEY_KEY):
        request.session.pop(other, None)
    request.session[key] = value
    screen_session_start(session_key=session_key(request), actor=actor, client_address=client_address(request))


def _relying_party() -> dict[str, str]:
    """The passkeys' relying party for the pages that use them: their script checks that the page is at one of
    the origins, and says where passkeys work when it is not (at 127.0.0.1, say, while they work at localhost)."""
    return {"passkey_rp_id": relying_party_id(), "passkey_origins": " ".join(settings.PASSKEY_ORIGINS)}


@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    next_url = _next_url(request, request.POST.get("next") or request.GET.get("next"))
    if request.method == "GET":
        return render(request, "accounts/login.html", {"next": next_url, "error": "", **_relying_party()})
    form = TokenLoginSerializer(data=request.POST)
    try:
        token = token_check(form.validated_data["token"], client_address(request)) if form.is_valid() else None
    except TooManyRequests as exc:
        context = {"next": next_url, "error": exc.detail, **_relying_party()}
        response = render(request, "accounts/login.html", context, status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    if token is None:
        error = "That token is not valid or has been revoked."
        return render(
            request, "accounts/login.html", {"next": next_url, "error": error, **_relying_party()}, status=401
        )
    _session_start(request, token.actor, key=SESSION_TOKEN_KEY, value=token.pk)
    return redirect(next_url)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    if request.session.session_key:
        screen_session_end(request.session.session_key)
    logout(request)
    return redirect("login")


@login_required
def audit_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/audit."""
    try:
        query = resources.audit.screen_query(request.GET)
    except ServiceError as exc:  # a filter its API twin refuses: the same 400 and words
        return error_page(request, exc)
    return render(
        request, "accounts/audit.html", {"entries": resources.audit.render(audit_list(**query)), "filters": query}
    )


# --- sessions ---
@login_required
@require_http_methods(["GET"])
def session_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/sessions, with a revoke button per session."""
    sessions = ScreenSessionSerializer(screen_session_list(), many=True).data
    own = screen_session_list().filter(session_key=session_key(request)).values_list("pk", flat=True).first()
    return render(request, "accounts/sessions.html", {"sessions": sessions, "own": own})


@login_required
@require_POST
def session_revoke_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Screen twin of DELETE /api/sessions/<id>; revoking one's own session signs out."""
    session, refused = screen_write(request, lambda: screen_session_revoke(session_id, actor=request.user.username))
    if refused:
        return refused
    assert session is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, f"Session {session.pk} of {session.actor} revoked.")
    return redirect("sessions")


# --- passkeys ---
def _json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return {}
    return body if isinstance(body, dict) else {}


def _refusal_json(exc: ServiceError) -> JsonResponse:
    """A refusal as the API words it (problem+json), for the browser's script."""
    return problem_json_response(exc.status, exc.detail, title=exc.title, slug=exc.slug, errors=exc.errors)


@require_POST
def passkey_sign_in_options_view(request: HttpRequest) -> HttpResponse:
    """The options of navigator.credentials.get() for a sign-in, with a challenge for this browser's session
    (one is made for a browser that has none yet)."""
    challenge = passkey_challenge_issue(purpose=ChallengePurpose.SIGN_IN, session_key=session_key(request))
    return HttpResponse(authentication_options(challenge=challenge), content_type="application/json")


@require_POST
def passkey_sign_in_view(request: HttpRequest) -> HttpResponse:
    """Sign in with the browser's answer `{"credential": ..., "next": ...}`: `{"redirect": url}`, or the
    refusal's status with `{"title", "detail"}`."""
    body = _json_body(request)
    try:
        passkey = passkey_sign_in(credential=body.get("credential"), session_key=request.session.session_key or "")
    except ServiceError as exc:
        return _refusal_json(exc)
    _session_start(request, passkey.actor, key=SESSION_PASSKEY_KEY, value=passkey.pk)
    return JsonResponse({"redirect": _next_url(request, body.get("next"))})


@login_required
@require_http_methods(["GET"])
def passkey_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/passkeys: one's own passkeys, to rename or revoke, and a new one to register."""
    passkeys = PasskeySerializer(passkey_list(request.user.username), many=True).data
    context = {"passkeys": passkeys, "own": request.session.get(SESSION_PASSKEY_KEY), **_relying_party()}
    return render(request, "accounts/passkeys.html", context)


@login_required
@require_POST
def passkey_register_options_view(request: HttpRequest) -> HttpResponse:
    """The options of navigator.credentials.create() for a new passkey of the signed-in actor."""
    actor = request.user.username
    challenge = passkey_challenge_issue(
        purpose=ChallengePurpose.REGISTER, session_key=session_key(request), actor=actor
    )
    registered = list(passkey_list(actor).values_list("credential_id", flat=True))
    options = registration_options(actor=actor, challenge=challenge, registered=registered)
    return HttpResponse(options, content_type="application/json")


@login_required
@require_POST
def passkey_register_view(request: HttpRequest) -> HttpResponse:
    """Register the browser's new passkey `{"name": ..., "credential": ...}`: 201 with the passkey as
    GET /api/passkeys shows it, or the refusal's status with `{"title", "detail", "errors"}`."""
    body = _json_body(request)
    try:
        passkey = passkey_register(
            actor=request.user.username,
            credential=body.get("credential"),
            session_key=request.session.session_key or "",
            submitted=PasskeyNameSerializer(data={key: body[key] for key in ("name",) if key in body}),
        )
    except ServiceError as exc:
        return _refusal_json(exc)
    messages.success(request, f"Passkey {passkey.name!r} registered.")
    return JsonResponse(PasskeySerializer(passkey).data, status=201)


@login_required
@require_POST
def passkey_rename_view(request: HttpRequest, passkey_id: int) -> HttpResponse:
    """Screen twin of PATCH /api/passkeys/<id>."""
    submitted = PasskeyNameSerializer(data=request.POST)
    passkey, refused = screen_write(
        request, lambda: passkey_rename(passkey_id, actor=request.user.username, submitted=submitted)
    )
    if refused:
        return refused
    assert passkey is not None  # as above
    messages.success(request, f"Passkey {passkey.pk} renamed {passkey.name!r}.")
    return redirect("passkeys")


@login_required
@require_POST
def passkey_revoke_view(request: HttpRequest, passkey_id: int) -> HttpResponse:
    """Screen twin of DELETE /api/passkeys/<id>; revoking the passkey the browser signed in with signs it out
    at the next request."""
    passkey, refused = screen_write(request, lambda: passkey_revoke(passkey_id, actor=request.user.username))
    if refused:
        return refused
    assert passkey is not None  # as above
    messages.success(request, f"Passkey {passkey.name!r} revoked: it signs no one in again.")
    return redirect("passkeys")
