"""API of the reports app (so far): pausing and resuming conversions."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from config.api.schema import problems
from config.api.views import TokenApiView
from reports.actions import conversions_pause, conversions_resume
from reports.serializers import RunControlSerializer


def _control(action: str, corpus: str | None, service: str | None) -> dict:
    if action == "pause":
        return {"corpus": corpus, "service": service, "action": action,
                "blocked": conversions_pause(corpus_name=corpus, service_name=service)}  # fmt: skip
    return {"corpus": corpus, "service": service, "action": action,
            "resumed": conversions_resume(corpus_name=corpus, service_name=service)}  # fmt: skip


class PairPauseApi(TokenApiView):
    audit_action = "conversions.pause"

    @extend_schema(
        operation_id="reports_pause", summary="Pause a run: block the pair's tasks in progress",
        request=None, responses={200: RunControlSerializer, **problems(404)}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request, corpus: str, service: str) -> Response:
        return Response(RunControlSerializer(_control("pause", corpus, service)).data)


class PairResumeApi(TokenApiView):
    audit_action = "conversions.resume"

    @extend_schema(
        operation_id="reports_resume", summary="Resume a run: blocked tasks of the pair back to TODO",
        request=None, responses={200: RunControlSerializer, **problems(404)}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request, corpus: str, service: str) -> Response:
        return Response(RunControlSerializer(_control("resume", corpus, service)).data)


class FleetPauseApi(TokenApiView):
    audit_action = "conversions.pause"

    @extend_schema(
        operation_id="conversions_pause", summary="Pause every conversion: block all tasks in progress",
        request=None, responses={200: RunControlSerializer}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        return Response(RunControlSerializer(_control("pause", None, None)).data)


class FleetResumeApi(TokenApiView):
    audit_action = "conversions.resume"

    @extend_schema(
        operation_id="conversions_resume", summary="Resume every conversion: all blocked tasks back to TODO",
        request=None, responses={200: RunControlSerializer}, tags=["reports"],
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        return Response(RunControlSerializer(_control("resume", None, None)).data)
