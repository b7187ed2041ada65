"""Shared by the HTML views: the input-serializer check that speaks like the API, journal params,
the error page, and htmx's stop-polling status."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from rest_framework.serializers import Serializer

from config.errors import BadRequest, ServiceError

# htmx stops polling when a response carries this status.
HTMX_STOP_POLLING = 286


def validated(serializer: Serializer) -> dict[str, Any]:
    """The serializer's data, or BadRequest with its field errors: the words the API twin answers with."""
    if not serializer.is_valid():
        raise BadRequest("The request has invalid fields.", errors=serializer.errors)
    return serializer.validated_data


def form_params(post: QueryDict) -> dict[str, str]:
    """The posted fields as the journal should see them (the CSRF token is not a parameter)."""
    return {key: value for key, value in post.items() if key != "csrfmiddlewaretoken"}


def error_page(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    """The error screen for an unknown corpus, service or job, with the action's status and words."""
    return render(request, "error.html", {"status": exc.status, "detail": exc.detail}, status=exc.status)
