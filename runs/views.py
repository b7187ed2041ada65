"""Runs screens: the retention screen (pruning of run history)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from config.errors import BadRequest, Forbidden, ServiceError
from config.screens import error_page, validated
from runs.actions import history_prune
from runs.queries import prune_preview
from runs.serializers import CUTOFF_HELP, PruneParamsSerializer, PruneSummarySerializer

# --- retention: pruning of run history (admins only; deliberately without an API twin) ----------


@login_required
@require_http_methods(["GET", "POST"])
def retention_view(request: HttpRequest) -> HttpResponse:
    """GET ?before=DATE[&corpus=&service=] previews what a prune removes; POST with the same fields and
    the cutoff typed again as `confirm` prunes (runs.actions.history_prune, journaled)."""
    if not request.user.is_staff:
        return error_page(request, Forbidden("Pruning run history is for admins (create_token ACTOR --staff)."))
    data = request.POST if request.method == "POST" else request.GET
    form = {key: data.get(key, "") for key in ("before", "corpus", "service")}
    context: dict[str, Any] = {"form": form, "summary": None, "error": "", "cutoff_help": CUTOFF_HELP}
    if request.method == "GET" and not form["before"]:
        return render(request, "runs/retention.html", context)
    try:
        params = validated(PruneParamsSerializer(data=form))
        if request.method == "POST":
            if data.get("confirm", "").strip() != form["before"].strip():
                context["summary"] = PruneSummarySerializer(prune_preview(**params)).data
                raise BadRequest(f"Type the cutoff {form['before']} into the confirmation field to prune.")
            total = history_prune(**params, actor=request.user.username)["total"]
            messages.success(request, _removed_sentence(total))
            return redirect(reverse("runs-retention") + "?" + urlencode(form))
        context["summary"] = PruneSummarySerializer(prune_preview(**params)).data
    except ServiceError as exc:
        field_errors = [str(error) for errors in (exc.errors or {}).values() for error in errors]
        context["error"] = " ".join(field_errors) or exc.detail
        return render(request, "runs/retention.html", context, status=exc.status)
    return render(request, "runs/retention.html", context)


def _removed_sentence(total: dict[str, int]) -> str:
    return (
        f"Pruned {total['runs']} runs, {total['snapshots']} snapshots and {total['diffs']} diffs"
        f" ({total['diff_rows']} diff rows), freeing {filesizeformat(total['bytes'])} for reuse."
    )
