"""Shared by the HTML views of every app: the input-serializer check that speaks like the API, the posted
fields, the error page and what a write's refusal answers, the POST of a deletion screen, htmx's
stop-polling status, the empty-field rule of filter forms, durations as people read them, values for people
(the `human` template library: `{% load human %}`, `{{ value|human:key }}`, `{{ seconds|duration }}`,
`{{ ms|duration_ms }}`) and the pager of a paginated table."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar
from urllib.parse import urlencode

from django import template
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from rest_framework.serializers import Serializer

from config.api.deletions import ConfirmSerializer, Deleted, result_files_sentence
from config.errors import BadRequest, ServiceError
from config.live import get_config

# htmx stops polling when a response carries this status.
HTMX_STOP_POLLING = 286

T = TypeVar("T")


def validated(serializer: Serializer[Any]) -> dict[str, Any]:
    """The serializer's data, or BadRequest with its field errors: the words the API twin answers with."""
    if not serializer.is_valid():
        raise BadRequest("The request has invalid fields.", errors=serializer.errors)
    data: dict[str, Any] = serializer.validated_data
    return data


def form_params(post: QueryDict) -> dict[str, str]:
    """The posted fields, without the CSRF token: what a form shows back to the operator."""
    return {key: post.get(key, "") for key in post if key != "csrfmiddlewaretoken"}


def session_key(request: HttpRequest) -> str:
    """The key of the browser's Django session; one is made for a browser that has none yet."""
    if request.session.session_key is None:
        request.session.create()
    key = request.session.session_key
    assert key is not None  # create() gave the session its key
    return key


def error_page(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    """The error screen for an unknown corpus, service or job, with the action's status and words."""
    return render(request, "error.html", {"status": exc.status, "detail": exc.detail}, status=exc.status)


def screen_write(
    request: HttpRequest, call: Callable[[], T], *, form: Callable[[ServiceError], HttpResponse] | None = None
) -> tuple[T | None, HttpResponse | None]:
    """Run one write action for a screen (the action journals itself): (its result, None), or (None, the
    answer to its refusal) with the action's status and words, as its API twin answers. That answer is the
    error page when what the write names is unknown (404) or the screen has no form, else `form(exc)`: the
    form again, with the operator's input and the refusal."""
    try:
        return call(), None
    except ServiceError as exc:
        if form is None or exc.status == 404:
            return None, error_page(request, exc)
        return None, form(exc)


def form_again(request: HttpRequest, template: str, context: dict[str, Any]) -> Callable[[ServiceError], HttpResponse]:
    """screen_write's `form` for a page that is its own form: the page again, with the refusal's words,
    its field errors and its status."""
    return lambda exc: render(
        request, template, {**context, "error": exc.detail, "errors": exc.errors or {}}, status=exc.status
    )


def deletion_write(
    request: HttpRequest,
    delete: Callable[..., Deleted],
    *,
    page: tuple[str, dict[str, Any]],
    done: str,
    then: str,
) -> HttpResponse:
    """The POST of a deletion screen, the twin of a DELETE ...?confirm=<name>: `delete` (the action, which
    journals itself) gets the actor and the typed confirmation; then a redirect to the URL `then`, saying
    `done` and what became of the result archives, or `page` (template, context) again with the refusal."""
    deleted, refused = screen_write(
        request,
        lambda: delete(actor=request.user.username, submitted=ConfirmSerializer(data=request.POST)),
        form=form_again(request, *page),
    )
    if refused:
        return refused
    assert deleted is not None  # screen_write gives the result when it gives no refusal
    messages.success(request, f"{done} {result_files_sentence(deleted)}")
    return redirect(then)


def given(query: QueryDict, fields: Collection[str] | None = None) -> QueryDict:
    """The query string or posted form without its empty fields (and, with `fields`, without the others):
    an empty form field means "not narrowed", where the API would have left the parameter out."""
    kept = query.copy()
    for key in [key for key, value in query.items() if value == "" or (fields is not None and key not in fields)]:
        del kept[key]
    return kept


def duration_text(seconds: float | None) -> str:
    """A duration as people read it, short enough for a table cell: 0.4 ms, 850 ms, 12.3 s, 2 min 23 s,
    1 h 4 min, 3 d 2 h (two units at most, the second left out when it is 0); empty for none."""
    if seconds is None:
        return ""
    if seconds < 0:
        return f"-{duration_text(-seconds)}"
    ms = seconds * 1000
    if round(ms, 1) < 10:
        return f"{_decimal(ms)} ms"
    if round(ms) < 1000:
        return f"{round(ms)} ms"
    if round(seconds, 1) < 60:
        return f"{_decimal(seconds)} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return _two_units(minutes, "min", rest, "s")
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return _two_units(hours, "h", minutes, "min")
    days, hours = divmod(hours, 24)
    return _two_units(days, "d", hours, "h")


def duration_ms_text(ms: float | None) -> str:
    """A duration given in milliseconds, as duration_text reads it."""
    return "" if ms is None else duration_text(ms / 1000)


def _decimal(value: float) -> str:
    """At most one decimal, none when it is 0: 12.3, 12."""
    return f"{value:.1f}".removesuffix(".0")


def _two_units(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big} {big_unit} {small} {small_unit}" if small else f"{big} {big_unit}"


# --- values for people ---
register = template.Library()  # the `human` library (settings.TEMPLATES' libraries)

_SIZE_UNITS = ("bytes", "KB", "MB", "GB", "TB", "PB")
# Whole numbers that name rather than count: shown without thousands separators.
_NAMING_SUFFIXES = ("port", "pid", "_id", "version")


def size_text(count: float) -> str:
    """A size in bytes as people read it: 512 bytes, 3.4 KB, 73.8 GB (units of 1024)."""
    value, unit = float(count), 0
    while abs(value) >= 1024 and unit < len(_SIZE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value):,} bytes" if unit == 0 else f"{value:,.1f} {_SIZE_UNITS[unit]}"


def number_text(value: float) -> str:
    """A count with thousands separators (12,345), a fraction with at most three decimals."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def scalar_text(value: Any, key: str = "") -> str:
    """One value in words, its unit read off the last part of its key (`free_bytes`, `results.min_free_mb`,
    `stall_seconds`, `p50_ms`): a size, a duration, yes or no, a count; a text as it is; nothing as a dash."""
    name = key.rsplit(".", 1)[-1].lower()
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    if name.endswith(_NAMING_SUFFIXES) and isinstance(value, int):
        return str(value)
    if name.endswith("bytes"):
        return size_text(value)
    if name.endswith("_mb"):
        return size_text(value * 1024 * 1024)
    if name.endswith(("seconds", "timeout")):
        return duration_text(value)
    if name.endswith("_ms"):
        return duration_ms_text(value)
    return number_text(value)


@register.filter
def duration(seconds: float | str | None) -> str:
    """`{{ job.duration_seconds|duration }}`: a duration in seconds as people read it (duration_text); a dash
    for none."""
    return "—" if seconds is None or seconds == "" else duration_text(float(seconds))


@register.filter
def duration_ms(ms: float | str | None) -> str:
    """`{{ row.runtime_ms|duration_ms }}`: a duration in milliseconds as people read it; a dash for none."""
    return "—" if ms is None or ms == "" else duration_ms_text(float(ms))


@register.filter
def words(key: str) -> str:
    """A key as a label for people: `heartbeat_age_seconds` reads `heartbeat age seconds`."""
    return str(key).replace("_", " ")


@register.filter
def human(value: Any, key: str = "") -> str | SafeString:
    """A value for people: a scalar as scalar_text says, a list of scalars joined by commas, and a
    mapping (or a list of them) as a list of `key: value` lines, each value read with its own key."""
    if isinstance(value, dict):
        if not value:
            return "—"
        return format_html(
            '<ul class="human">{}</ul>',
            format_html_join("", "<li>{}: {}</li>", ((k, human(v, str(k))) for k, v in value.items())),
        )
    if isinstance(value, list | tuple):
        if not value:
            return "—"
        if any(isinstance(item, dict | list | tuple) for item in value):
            return format_html_join("", "{}", ((human(item, key),) for item in value))
        return ", ".join(scalar_text(item, key) for item in value)
    return scalar_text(value, key)


def pager(
    offset: int, page_size: int, shown: int, count: int | None, params: dict[str, str] | None = None
) -> dict[str, Any]:
    """Rows x-y (of count, when known) and the first/prev/next links of a paginated report; `params`
    are the page's other query parameters (its filters), kept in every link."""

    def link(to: int) -> str:
        return "?" + urlencode({**(params or {}), "offset": to, "page_size": page_size})

    end = offset + shown
    more = end < count if count is not None else shown == page_size
    return {
        "start": offset + 1 if shown else 0,
        "end": end,
        "count": count,
        "first": link(0) if offset > 0 else None,
        "prev": link(max(offset - page_size, 0)) if offset > 0 else None,
        # Pages past MAX_REPORT_OFFSET are refused (400), so no link leads there.
        "next": link(offset + page_size) if more and offset + page_size <= get_config().MAX_REPORT_OFFSET else None,
    }
