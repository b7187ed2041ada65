"""POST /convert: the conversion engine over HTTP (form-encoded), limited in size, time and concurrency
so that a public endpoint cannot be used to tie up the machine.

A conversion goes first to the warm engine (`manage.py convert_engine`, conversion/warm.py): a server of its
profile, LaTeXML already prepared, forks a child for it. When the engine cannot serve it (not running, its
pool still starting or all its servers failed, CONVERT_WARM off) a cold latexmlc converts it on the request's
thread of a gthread web worker (see `ops.stack.web_child`), holding one thread, never a whole process. The
answer's `engine` says which served it. The slots of `services.convert_slots` bound how many of each run at
once across all web processes, and a request over that limit is refused at once."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView
from config.api.errors import PROBLEM_CONTENT_TYPE, problem_body
from config.api.fields import StrictCharField
from conversion import warm
from conversion.choices import LATEXML_NAMES, Chunk, ConvertEngine, LatexmlStatus, OutputFormat
from conversion.engine import EngineMissing, convert_text
from conversion.output_checks import checked_text
from services.convert_slots import convert_slot_take
from services.queries import conversion_sandbox, convert_engine_socket

# What /convert offers of latexmlc's formats and chunks.
_FORMATS = [
    f.value for f in (OutputFormat.HTML5, OutputFormat.HTML, OutputFormat.HTML4, OutputFormat.XHTML, OutputFormat.XML)
]
_WHATS = [chunk.value for chunk in (Chunk.DOCUMENT, Chunk.FRAGMENT, Chunk.MATH)]
# What a refused client is told to wait: about one short conversion (latexmlc alone takes ~1 s to start).
RETRY_AFTER_SECONDS = 2
# What the web waits for the warm engine beyond the conversion's own time and the wait for a server.
WARM_ANSWER_MARGIN_SECONDS = 10


class ConvertRequestSerializer(serializers.Serializer[object]):
    tex = StrictCharField(allow_blank=True, trim_whitespace=False, required=False, default="",
                          help_text="the TeX source, a whole document unless whatsin says otherwise (a formula needs"
                          " whatsin=math); a 'literal:' prefix is accepted and dropped")  # fmt: skip
    format = serializers.ChoiceField(choices=_FORMATS, required=False, default="html5")
    whatsin = serializers.ChoiceField(choices=_WHATS, required=False, default="document")
    whatsout = serializers.ChoiceField(choices=_WHATS, required=False, default="document")
    timeout = serializers.IntegerField(min_value=1, required=False)
    includestyles = serializers.BooleanField(required=False, default=False)
    pmml = serializers.BooleanField(required=False, default=False)
    cmml = serializers.BooleanField(required=False, default=False)


class ConversionSerializer(serializers.Serializer[object]):
    result = serializers.CharField(allow_blank=True)
    log = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=list(LATEXML_NAMES.values()))
    status_code = serializers.IntegerField()
    engine = serializers.ChoiceField(
        choices=[engine.value for engine in ConvertEngine],
        help_text="what converted it: the warm engine (a prepared LaTeXML forked for it) or a cold latexmlc",
    )
    engine_note = serializers.CharField(
        required=False, help_text="why a cold latexmlc converted it when the warm engine is on"
    )


def _refusal(http_status: int, why: str, what: str) -> Response:
    """A problem body that also carries the conversion fields: status_code 3 and a log line saying why."""
    body = problem_body(http_status, why)
    body.update(
        result="",
        log=f"Fatal:input:{what} {why}\nStatus:conversion:{LatexmlStatus.FATAL}\n",
        status_code=LatexmlStatus.FATAL.value,
    )
    return Response(body, status=http_status, content_type=PROBLEM_CONTENT_TYPE)


def _busy() -> Response:
    busy = _refusal(503, "All conversion slots are busy; retry shortly.", "busy")
    busy["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return busy


def _warm(tex: str, options: dict[str, Any], limits: dict[str, int]) -> dict[str, Any]:
    """The warm engine's answer for `tex` with the request's options; WarmUnavailable when it cannot serve it
    (also when its servers run under other limits than `limits`)."""
    profile = {name: options[name] for name in ("format", "whatsin", "whatsout", "includestyles", "pmml", "cmml")}
    wait = settings.CONVERT_WARM_WAIT_SECONDS
    message = {"op": "convert", "profile": profile, "tex": tex, "timeout": options["timeout"], "wait": wait,
               "limits": limits}  # fmt: skip
    return warm.request(convert_engine_socket(), message,
                        timeout=wait + options["timeout"] + WARM_ANSWER_MARGIN_SECONDS)  # fmt: skip


class ConvertApi(PublicApiView):
    parser_classes = [FormParser, MultiPartParser]

    @extend_schema(
        operation_id="convert",
        summary="Convert TeX (a document, a fragment or a formula) with LaTeXML and answer result and log",
        request={"application/x-www-form-urlencoded": ConvertRequestSerializer},
        responses={
            200: ConversionSerializer,
            400: OpenApiResponse(description="empty, oversized or invalid input"),
            503: OpenApiResponse(
                description="all conversion slots are busy (at once, with Retry-After), or the conversion sandbox"
                " or the engine is missing"
            ),
        },
        parameters=[
            OpenApiParameter(
                "Retry-After",
                OpenApiTypes.INT,
                OpenApiParameter.HEADER,
                response=[503],
                description="seconds to wait before retrying, when all conversion slots are busy",
            ),
        ],
        tags=["conversion"],
    )
    def post(self, request: Request) -> Response:
        params = ConvertRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        options = dict(params.validated_data)
        tex = options.pop("tex")
        if not tex.strip() or tex.strip() == "literal:":
            return _refusal(400, "The input is empty: pass the TeX source in the field tex.", "empty")
        if len(tex.encode()) > settings.CONVERT_MAX_BYTES:
            return _refusal(400, f"The input is larger than {settings.CONVERT_MAX_BYTES} bytes.", "too_large")
        options["timeout"] = min(options.get("timeout") or settings.CONVERT_TIMEOUT_SECONDS,
                                 settings.CONVERT_TIMEOUT_SECONDS)  # fmt: skip
        if options["whatsin"] == "math" and options["whatsout"] == "math" and not (options["pmml"] or options["cmml"]):
            options["pmml"] = True  # formula in, formula out: presentation MathML unless asked otherwise
        # The workers' per-conversion limits, as this process's settings hold them now (its own timeout is above).
        limits = {"memory_mb": settings.CONVERSION_MEMORY_MB, "disk_mb": settings.CONVERSION_DISK_MB,
                  "max_processes": settings.CONVERSION_MAX_PROCESSES}  # fmt: skip
        note = None
        if settings.CONVERT_WARM:
            slot = convert_slot_take(warm=True)
            if slot is None:
                return _busy()
            try:
                converted = _warm(tex, options, limits)
            except warm.WarmBusy:
                return _busy()  # its pool is at capacity: a cold conversion beside it would only slow both
            except (warm.WarmUnavailable, ValueError) as exc:  # ValueError: the engine refused the request
                converted, note = None, str(exc)
            finally:
                slot.release()
        else:
            converted = None
        if converted is None:
            slot = convert_slot_take()
            if slot is None:
                return _busy()
            try:
                converted = convert_text(
                    tex, sandbox=conversion_sandbox(), memory_mb=limits["memory_mb"], disk_mb=limits["disk_mb"],
                    max_processes=limits["max_processes"], **options,
                )  # fmt: skip
            except EngineMissing as exc:
                return _refusal(503, str(exc), "engine_missing")
            finally:
                slot.release()
            converted["engine"] = ConvertEngine.LATEXMLC
            if note is not None:
                converted["engine_note"] = note
        else:
            converted["engine"] = ConvertEngine.WARM
        if options["whatsin"] == options["whatsout"] == Chunk.DOCUMENT and options["format"] != OutputFormat.XML:
            converted = checked_text(converted, tex.removeprefix("literal:"))  # the output checks of a whole document
        return Response(ConversionSerializer(converted).data)
