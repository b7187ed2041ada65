"""Sign in to the screens with a service token (a Django session follows), sign out, the journal, the
signed-in sessions."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from accounts.actions import screen_session_end, screen_session_revoke, screen_session_start
from accounts.lockout import token_check
from accounts.middleware import SESSION_TOKEN_KEY
from accounts.queries import audit_list, screen_session_list
from accounts.serializers import (
    AuditEntrySerializer,
    AuditListParamsSerializer,
    ScreenSessionSerializer,
    TokenLoginSerializer,
)
from config.api.requests import client_address
from config.errors import ServiceError, TooManyRequests
from config.middleware import url_without_token
from config.screens import error_page, given, screen_write, validated


@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    # A token in the page to return to would be written into this page and the browser's history.
    next_url = url_without_token(request.POST.get("next") or request.GET.get("next") or "/corpora")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = "/corpora"
    if request.method == "GET":
        return render(request, "accounts/login.html", {"next": next_url, "error": ""})
    form = TokenLoginSerializer(data=request.POST)
    try:
        token = token_check(form.validated_data["token"], client_address(request)) if form.is_valid() else None
    except TooManyRequests as exc:
        response = render(request, "accounts/login.html", {"next": next_url, "error": exc.detail}, status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    if token is None:
        error = "That token is not valid or has been revoked."
        return render(request, "accounts/login.html", {"next": next_url, "error": error}, status=401)
    user, _ = get_user_model().objects.get_or_create(username=token.actor)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[SESSION_TOKEN_KEY] = token.pk
    screen_session_start(
        session_key=request.session.session_key, actor=token.actor, client_address=client_address(request)
    )
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
        query = validated(AuditListParamsSerializer(data=given(request.GET)))
    except ServiceError as exc:  # a filter its API twin refuses: the same 400 and words
        return error_page(request, exc)
    entries = AuditEntrySerializer(audit_list(**query), many=True).data
    return render(request, "accounts/audit.html", {"entries": entries, "filters": query})


# --- sessions ---
@login_required
@require_http_methods(["GET"])
def session_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/sessions, with a revoke button per session."""
    sessions = ScreenSessionSerializer(screen_session_list(), many=True).data
    own = screen_session_list().filter(session_key=request.session.session_key).values_list("pk", flat=True).first()
    return render(request, "accounts/sessions.html", {"sessions": sessions, "own": own})


@login_required
@require_POST
def session_revoke_view(request: HttpRequest, session_id: int) -> HttpResponse:
    """Screen twin of DELETE /api/sessions/<id>; revoking one's own session signs out."""
    session, refused = screen_write(request, lambda: screen_session_revoke(session_id, actor=request.user.username))
    if refused:
        return refused
    messages.success(request, f"Session {session.pk} of {session.actor} revoked.")
    return redirect("sessions")
