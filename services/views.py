"""Services screens: the same queries, DTOs and input serializers as /api/services, the same actions.

Like their token-gated API twin, every one of them needs a signed-in operator."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from config.errors import ServiceError
from config.screens import deletion_write, error_page, form_params, screen_write
from conversion.profiles import PRESETS, SWITCHES
from services import actions
from services.models import Service
from services.queries import service_get, service_list, worker_list
from services.serializers import (
    ProfileSerializer,
    ServiceRegisterRequestSerializer,
    ServiceSerializer,
    WorkerSerializer,
    lease_request,
    preset_records,
)

# Up to 18 ASCII digits: a longer number is far past the serializer's maximum and is refused as text.
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,18}")


def lease_body(post: QueryDict) -> dict[str, Any]:
    """The lease form as the JSON body the API takes: empty is null, a whole number an integer.
    Anything else stays text, so the shared serializer refuses it with the API's own message."""
    raw = post.get("seconds", "").strip()
    if raw == "":
        return {"seconds": None}
    return {"seconds": int(raw) if _WHOLE_NUMBER.fullmatch(raw) else raw}


def profile_body(post: QueryDict) -> dict[str, Any]:
    """The profile form as the JSON body the API takes: a preset alone (the presets form), or every option
    (the options form, marked by its `options` field): lists one item a line, a switch on when checked,
    empty limits null, whole numbers integers. Anything else stays text for the shared serializer to refuse."""
    body: dict[str, Any] = {}
    preset = post.get("preset", "").strip()
    if preset:
        body["preset"] = preset
    if "options" not in post:
        return body
    body["engine"] = post.get("engine", "").strip()
    for name in ("preloads", "css", "paths"):
        body[name] = [line.strip() for line in post.get(name, "").splitlines() if line.strip()]
    for name in SWITCHES:
        body[name] = name in post
    for name in ("timeout_seconds", "memory_mb"):
        raw = post.get(name, "").strip()
        body[name] = None if raw == "" else int(raw) if _WHOLE_NUMBER.fullmatch(raw) else raw
    return body


@login_required
@require_http_methods(["GET", "POST"])
def service_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET and POST /api/services: the list and the register form."""
    if request.method == "GET":
        return _list_page(request)
    params = form_params(request.POST)
    service, refused = screen_write(
        request,
        lambda: actions.service_register(
            actor=request.user.username, submitted=ServiceRegisterRequestSerializer(data=request.POST)
        ),
        form=lambda exc: _list_page(request, form=params, error=exc),
    )
    if refused:
        return refused
    assert service is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, f"The service {service.name} is registered; activate it on a corpus to create tasks.")
    return redirect("service", service=service.name)


def _list_page(
    request: HttpRequest, *, form: dict[str, str] | None = None, error: ServiceError | None = None
) -> HttpResponse:
    context = {
        "services": ServiceSerializer(service_list(), many=True).data,
        "presets": list(PRESETS),
        "form": form or {},
        "error": error.detail if error else "",
        "errors": (error.errors or {}) if error else {},
    }
    return render(request, "services/list.html", context, status=error.status if error else 200)


def _detail_page(
    request: HttpRequest, name: str, *, error: ServiceError | None = None, form: str = "lease"
) -> HttpResponse:
    try:
        service = ServiceSerializer(service_get(name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    lease_refused = error if error is not None and form == "lease" else None
    profile_refused = error if error is not None and form == "profile" else None
    profile = profile_body(request.POST) if profile_refused and "options" in request.POST else None
    context = {
        "service": service,
        "seconds": request.POST.get("seconds", "") if lease_refused else "",
        "error": lease_refused.detail if lease_refused else "",
        "errors": (lease_refused.errors or {}) if lease_refused else {},
        "presets": preset_records(),
        "switches": SWITCHES,
        # The options form shows what was sent after a refusal, else the service's profile.
        "profile_form": _profile_form(profile if profile is not None else service["profile"]),
        "profile_error": profile_refused.detail if profile_refused else "",
        "profile_errors": (profile_refused.errors or {}) if profile_refused else {},
    }
    return render(request, "services/detail.html", context, status=error.status if error else 200)


@login_required
@require_http_methods(["GET"])
def service_detail_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of GET /api/services/<service>, with the lease form."""
    return _detail_page(request, service)


def _service_write(
    request: HttpRequest, service: str, call: Callable[[], Service], form: str, done: Callable[[Service], str]
) -> HttpResponse:
    """One change of a service from its page: refused, its page again with the error in the form; done, the page
    with `done(service)` as its message."""
    updated, refused = screen_write(
        request, call, form=lambda exc: _detail_page(request, service, error=exc, form=form)
    )
    if refused:
        return refused
    assert updated is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, done(updated))
    return redirect("service", service=service)


@login_required
@require_POST
def service_lease_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of PUT /api/services/<service>/lease: seconds, or empty to clear the override."""

    def done(updated: Service) -> str:
        seconds = updated.lease_seconds
        return f"Lease of {service}: {'cleared' if seconds is None else f'{seconds} s'}."

    return _service_write(
        request, service,
        lambda: actions.service_lease_set(
            name=service, actor=request.user.username,
            submitted=lambda: lease_request(service, lease_body(request.POST)),
        ),
        "lease", done,
    )  # fmt: skip


def _profile_form(profile: dict[str, Any]) -> dict[str, Any]:
    """A profile's options as the options form shows them: lists one item a line, limits as text."""
    return {
        "engine": profile.get("engine", ""),
        **{name: "\n".join(str(item) for item in profile.get(name) or []) for name in ("preloads", "css", "paths")},
        "switches": [name for name in SWITCHES if profile.get(name) is True],
        **{name: "" if profile.get(name) is None else str(profile[name]) for name in ("timeout_seconds", "memory_mb")},
    }


@login_required
@require_POST
def service_profile_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of PUT /api/services/<service>/profile: a preset, or the options of a profile."""

    def done(updated: Service) -> str:
        dto = ServiceSerializer(updated).data
        named = f"the preset {dto['profile_preset']}" if dto["profile_preset"] else "a profile of its own"
        return f"{service} now converts with {named} ({dto['profile_hash'][:12]})."

    return _service_write(
        request, service,
        lambda: actions.service_profile_set(
            name=service, actor=request.user.username, submitted=ProfileSerializer(data=profile_body(request.POST))
        ),
        "profile", done,
    )  # fmt: skip


@login_required
@require_http_methods(["GET", "POST"])
def service_delete_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of DELETE /api/services/<service>?confirm=<service>: the operator types the name."""
    try:
        dto = ServiceSerializer(service_get(service)).data
    except ServiceError as exc:
        return error_page(request, exc)
    if request.method == "GET":
        return render(request, "services/delete.html", {"service": dto})
    return deletion_write(
        request,
        partial(actions.service_delete, name=service),
        page=("services/delete.html", {"service": dto}),
        done=f"The service {service} was deleted with its tasks and messages in every corpus.",
        then=reverse("services"),
    )


@login_required
@require_http_methods(["GET"])
def worker_list_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of GET /api/services/<service>/workers, refreshed live."""
    try:
        workers = WorkerSerializer(worker_list(service), many=True).data
    except ServiceError as exc:
        return error_page(request, exc)
    template = "services/_workers_rows.html" if request.GET.get("fragment") == "rows" else "services/workers.html"
    return render(request, template, {"service": service, "workers": workers})
