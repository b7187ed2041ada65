"""Pagination of report-style pages (reports, run diffs, task lists): the page a request asks for, checked
against MAX_REPORT_OFFSET and MAX_REPORT_PAGE_SIZE, and its input serializer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework import serializers

from config.errors import BadRequest
from config.live import get_config


@dataclass(frozen=True)
class Page:
    offset: int
    page_size: int


def page_check(offset: Any, page_size: Any) -> Page:
    """offset and page_size of a report page; an offset beyond MAX_REPORT_OFFSET is a 400, a page size
    above MAX_REPORT_PAGE_SIZE is reduced to it."""
    try:
        offset = int(offset) if offset not in (None, "") else 0
        size = int(page_size) if page_size not in (None, "") else settings.REPORT_PAGE_DEFAULT
    except (TypeError, ValueError) as exc:
        raise BadRequest("offset and page_size must be whole numbers.", errors={"offset": ["not a number"]}) from exc
    if offset < 0 or size < 1:
        raise BadRequest("offset must be 0 or more and page_size at least 1.", errors={"offset": ["out of range"]})
    if offset > get_config().MAX_REPORT_OFFSET:
        raise BadRequest(
            f"offset {offset} is beyond the limit of {get_config().MAX_REPORT_OFFSET}; narrow the report instead.",
            errors={"offset": [f"at most {get_config().MAX_REPORT_OFFSET}"]},
        )
    return Page(offset=offset, page_size=min(size, get_config().MAX_REPORT_PAGE_SIZE))


class PageParamsSerializer(serializers.Serializer[object]):
    """A report page. The offset limit is checked by page_check (it follows MAX_REPORT_OFFSET at run
    time); a page size above MAX_REPORT_PAGE_SIZE is reduced to it."""

    offset = serializers.IntegerField(required=False, min_value=0, help_text="0 to MAX_REPORT_OFFSET")
    page_size = serializers.IntegerField(
        required=False, min_value=1, help_text="1 to MAX_REPORT_PAGE_SIZE (default 100); more is reduced to it"
    )
