"""Services screens: the same queries, DTOs and input serializers as /api/services, writes journaled.

Like their token-gated API twin, every one of them needs a signed-in operator."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.actions import journaled
from accounts.journal import Action
from config.api.deletions import ConfirmSerializer, result_files_sentence
from config.errors import ServiceError
from config.screens import error_page, form_params, validated
from services import actions
from services.queries import service_get, service_list, worker_list
from services.serializers import (
    LeaseUpdateRequestSerializer,
    ServiceRegisterRequestSerializer,
    ServiceSerializer,
    WorkerSerializer,
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


@login_required
@require_http_methods(["GET", "POST"])
def service_list_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET and POST /api/services: the list and the register form."""
    if request.method == "GET":
        return _list_page(request)
    name = request.POST.get("name", "")
    params = form_params(request.POST)
    try:
        with journaled(actor=request.user.username, action=Action.SERVICE_REGISTER, target=name[:200], params=params):
            body = validated(ServiceRegisterRequestSerializer(data=request.POST))
            service = actions.service_register(actor=request.user.username, **body)
    except ServiceError as exc:
        return _list_page(request, form=params, error=exc)
    messages.success(request, f"The service {service.name} is registered; activate it on a corpus to create tasks.")
    return redirect("service", service=service.name)


def _list_page(
    request: HttpRequest, *, form: dict[str, str] | None = None, error: ServiceError | None = None
) -> HttpResponse:
    context = {
        "services": ServiceSerializer(service_list(), many=True).data,
        "form": form or {},
        "error": error.detail if error else "",
        "errors": (error.errors or {}) if error else {},
    }
    return render(request, "services/list.html", context, status=error.status if error else 200)


def _detail_page(request: HttpRequest, name: str, *, error: ServiceError | None = None) -> HttpResponse:
    try:
        service = ServiceSerializer(service_get(name)).data
    except ServiceError as exc:
        return error_page(request, exc)
    context = {
        "service": service,
        "seconds": request.POST.get("seconds", "") if error else "",
        "error": error.detail if error else "",
        "errors": (error.errors or {}) if error else {},
    }
    return render(request, "services/detail.html", context, status=error.status if error else 200)


@login_required
@require_http_methods(["GET"])
def service_detail_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of GET /api/services/<service>, with the lease form."""
    return _detail_page(request, service)


@login_required
@require_POST
def service_lease_view(request: HttpRequest, service: str) -> HttpResponse:
    """Screen twin of PUT /api/services/<service>/lease: seconds, or empty to clear the override."""
    body = lease_body(request.POST)
    try:
        with journaled(actor=request.user.username, action=Action.SERVICE_LEASE, target=service, params=body):
            service_get(service)  # 404 before 400, as the API says it
            seconds = validated(LeaseUpdateRequestSerializer(data=body))["seconds"]
            actions.service_lease_set(name=service, seconds=seconds, actor=request.user.username)
    except ServiceError as exc:
        if exc.status == 404:
            return error_page(request, exc)
        return _detail_page(request, service, error=exc)
    messages.success(request, f"Lease of {service}: {'cleared' if seconds is None else f'{seconds} s'}.")
    return redirect("service", service=service)


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
    try:
        with journaled(
            actor=request.user.username, action=Action.SERVICE_DELETE, target=service, params=form_params(request.POST)
        ):
            confirm = validated(ConfirmSerializer(data=request.POST)).get("confirm")
            counts = actions.service_delete(name=service, confirm=confirm, actor=request.user.username)
    except ServiceError as exc:
        return render(request, "services/delete.html", {"service": dto, "error": exc.detail}, status=exc.status)
    messages.success(
        request,
        f"The service {service} was deleted with its tasks and messages in every corpus."
        f" {result_files_sentence(counts)}",
    )
    return redirect("services")


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
