"""Sign in to the screens with a service token (a Django session follows), sign out, the journal."""

from __future__ import annotations

from django.contrib.auth import get_user_model, login, logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from accounts.middleware import SESSION_TOKEN_KEY
from accounts.queries import audit_list, token_verify
from accounts.serializers import AuditEntrySerializer, AuditListParamsSerializer, TokenLoginSerializer


@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    next_url = request.POST.get("next") or request.GET.get("next") or "/corpora"
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = "/corpora"
    error = ""
    if request.method == "POST":
        form = TokenLoginSerializer(data=request.POST)
        token = token_verify(form.validated_data["token"]) if form.is_valid() else None
        if token is not None:
            user, _ = get_user_model().objects.get_or_create(username=token.actor)
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            request.session[SESSION_TOKEN_KEY] = token.pk
            return redirect(next_url)
        error = "That token is not valid or has been revoked."
    return render(request, "accounts/login.html", {"next": next_url, "error": error}, status=401 if error else 200)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("login")


@login_required
def audit_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/audit."""
    params = AuditListParamsSerializer(data=request.GET)
    query = params.validated_data if params.is_valid() else {}
    entries = AuditEntrySerializer(audit_list(**query), many=True).data
    return render(request, "accounts/audit.html", {"entries": entries, "filters": query})
