"""Jobs screens: the same queries and DTOs as /api/jobs, refreshed live with htmx polling."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from config.errors import ServiceError
from config.screens import HTMX_STOP_POLLING, error_page, screen_write
from jobs import resources
from jobs.actions import tables_analyze_start, tables_reindex_start
from jobs.choices import ACTIVE_STATES, JobKinds
from jobs.queries import job_get, job_list
from jobs.serializers import JobSerializer


@login_required
def job_list_view(request: HttpRequest) -> HttpResponse:
    try:
        query = resources.job_list_read.screen_query(request.GET)
    except ServiceError as exc:  # a filter its API twin refuses: the same 400 and words
        return error_page(request, exc)
    context = {"jobs": resources.job_list_read.render(job_list(**query)), "active": query.get("active", False)}
    template = "jobs/_rows.html" if request.GET.get("fragment") == "rows" else "jobs/list.html"
    return render(request, template, context)


@login_required
def job_detail_view(request: HttpRequest, uuid: str) -> HttpResponse:
    try:
        job = JobSerializer(job_get(uuid)).data
    except ServiceError as exc:
        return error_page(request, exc)
    if request.GET.get("fragment") == "body":
        finished = job["state"] not in ACTIVE_STATES
        response = render(request, "jobs/_detail_body.html", {"job": job})
        if finished:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "jobs/detail.html", {"job": job})


@login_required
@require_http_methods(["GET", "POST"])
def maintenance_view(request: HttpRequest) -> HttpResponse:
    """Screen twin of POST /api/maintenance/reindex|analyze."""
    # Operation -> (job kind, the action starting it), as the API twins MaintenanceReindexApi and MaintenanceAnalyzeApi.
    operations = {
        "reindex": (JobKinds.MAINTENANCE_REINDEX, tables_reindex_start),
        "analyze": (JobKinds.MAINTENANCE_ANALYZE, tables_analyze_start),
    }
    kinds = [kind for kind, _start in operations.values()]
    if request.method == "POST":
        operation = operations.get(request.POST.get("operation", ""))
        if operation is None:
            messages.error(request, "Choose reindex or analyze.")
            return redirect("maintenance")
        _kind, start = operation
        started, refused = screen_write(request, lambda: start(actor=request.user.username))
        if refused:
            return refused
        assert started is not None  # screen_write gives the result when it gives no refusal
        job, created = started
        if not created:
            messages.info(request, "A job of this kind is already running; showing it.")
        return redirect("job", uuid=job.uuid)
    recent = JobSerializer(job_list(kinds=kinds, limit=10), many=True).data
    return render(request, "jobs/maintenance.html", {"jobs": recent})
