"""What a deletion takes and answers, for every deletion endpoint and its screen twin: the `confirm`
parameter, and what it did to result archives on disk. A deletion answers 204 with no body (the
specification), so that travels in headers: how many files it removes, and the job removing them when
there are many."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Deleted:
    """What a deletion removed (corpora.pairs.data_purge, for a corpus, a service or one pair): messages,
    tasks, the result archives on disk and the job removing them when there are many, and a corpus's
    documents (None for the deletion of a service or of a pair)."""

    messages: int
    tasks: int
    result_files: int
    result_files_job: str | None = None
    documents: int | None = None

    def counts(self) -> dict[str, Any]:
        """The counts as the management commands print them: documents only for a corpus."""
        documents = {} if self.documents is None else {"documents": self.documents}
        return {
            "messages": self.messages,
            "tasks": self.tasks,
            **documents,
            "result_files": self.result_files,
            "result_files_job": self.result_files_job,
        }


def result_files_headers(deleted: Deleted) -> dict[str, str]:
    """The RESULT_FILES_HEADERS of a deletion's counts."""
    headers = {"X-Result-Files": str(deleted.result_files)}
    if deleted.result_files_job:
        headers["X-Result-Files-Job"] = deleted.result_files_job
    return headers


def result_files_sentence(deleted: Deleted) -> str:
    """What the screens say of a deletion's result archives."""
    files = deleted.result_files
    if deleted.result_files_job:
        return f"{files} result archives are being removed by a background job."
    return f"{files} result archive{'s' if files != 1 else ''} removed from disk."
