"""What a deletion takes and answers, for every deletion endpoint and its screen twin: the `confirm`
parameter, and what it did to result archives on disk. A deletion answers 204 with no body (the
specification), so that travels in headers: how many files it removes, and the job removing them when
there are many."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from config.api.fields import StrictCharField


class ConfirmSerializer(serializers.Serializer[object]):
    confirm = StrictCharField(required=False, help_text="must equal the name of what is deleted")

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        return {"confirm": attrs.get("confirm")}  # left out: None, which the deletion refuses with its words


RESULT_FILES_HEADERS = [
    OpenApiParameter("X-Result-Files", int, OpenApiParameter.HEADER, response=[204],
                     description="how many result archives on disk the deletion removes"),
    OpenApiParameter("X-Result-Files-Job", str, OpenApiParameter.HEADER, response=[204],
                     description="the job removing them, when there are too many to remove at once"),
]  # fmt: skip


def result_files_headers(counts: dict[str, Any]) -> dict[str, str]:
    """The RESULT_FILES_HEADERS of a deletion's counts."""
    headers = {"X-Result-Files": str(counts["result_files"])}
    if counts.get("result_files_job"):
        headers["X-Result-Files-Job"] = counts["result_files_job"]
    return headers


def result_files_sentence(counts: dict[str, Any]) -> str:
    """What the screens say of a deletion's result archives."""
    files = counts["result_files"]
    if counts.get("result_files_job"):
        return f"{files} result archives are being removed by a background job."
    return f"{files} result archive{'s' if files != 1 else ''} removed from disk."
