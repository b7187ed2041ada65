"""Operations screens: the same queries and DTOs as their /api twins."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ops.health import health
from ops.serializers import HealthSerializer


# --- detailed health ---
@login_required
def health_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of GET /api/health."""
    context = {"health": HealthSerializer(health()).data}
    template = "ops/_health_body.html" if request.GET.get("fragment") == "body" else "ops/health.html"
    return render(request, template, context)


# --- end detailed health ---
