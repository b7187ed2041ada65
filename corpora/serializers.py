"""Corpus DTOs and the request bodies of the corpora endpoints."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from config.api.fields import StrictCharField, StrictIntegerField
from config.names import NAME_MAX, NAME_RULE, name_is_valid


def validate_plain_name(value: str) -> str:
    if not name_is_valid(value):
        raise serializers.ValidationError(f"Not a valid name: {NAME_RULE}.")
    return value


class ImportRequestSerializer(serializers.Serializer):
    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    path = StrictCharField(max_length=4096, help_text="a readable directory inside the corpus roots")
    description = StrictCharField(max_length=2000, required=False, allow_blank=True, default="")


class StatusCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    in_progress = serializers.IntegerField(help_text="todo + queued")
    todo = serializers.IntegerField()
    queued = serializers.IntegerField()
    no_problem = serializers.IntegerField()
    warning = serializers.IntegerField()
    error = serializers.IntegerField()
    fatal = serializers.IntegerField()
    invalid = serializers.IntegerField()
    blocked = serializers.IntegerField()


class CorpusServiceSerializer(serializers.Serializer):
    name = serializers.CharField()
    protected = serializers.BooleanField()
    activated_at = serializers.DateTimeField(allow_null=True)
    counts = StatusCountsSerializer()


class CorpusSerializer(serializers.Serializer):
    """A corpus record as listed: its activated services by name."""

    name = serializers.CharField()
    description = serializers.CharField()
    state = serializers.CharField()
    parent = serializers.CharField(allow_null=True, help_text="the parent corpus of a sandbox")
    documents = serializers.IntegerField()
    services = serializers.ListField(child=serializers.CharField(), help_text="activated services")
    created_at = serializers.DateTimeField()
    imported_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField()


class SandboxConditionSerializer(serializers.Serializer):
    """What a sandbox was carved with (its SandboxRequest less the name), and where it came from."""

    service = serializers.CharField()
    status = serializers.CharField(required=False)
    severity = serializers.CharField(required=False)
    category = serializers.CharField(required=False)
    what = serializers.CharField(required=False)
    entry_contains = serializers.CharField(required=False)
    limit = serializers.IntegerField(required=False)
    per_class_limit = serializers.IntegerField(required=False)
    seed = serializers.IntegerField()


class CorpusDetailSerializer(CorpusSerializer):
    """A corpus with every service on it (import first) and its per-status counts."""

    services = CorpusServiceSerializer(many=True)
    condition = SandboxConditionSerializer(allow_null=True, help_text="what a sandbox was carved with; null otherwise")


class ConfirmSerializer(serializers.Serializer):
    confirm = StrictCharField(required=False, help_text="must equal the name of what is deleted")

    def validate(self, attrs: dict) -> dict:
        return {"confirm": attrs.get("confirm")}  # left out: None, which the deletion refuses with its words


# A deletion answers 204 with no body (the specification), so what it did to the result archives
# on disk travels in headers: how many files it removes, and the job removing them when many.
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


# --- dataset export -------------------------------------------------------------------------------


class ExportRequestSerializer(serializers.Serializer):
    """ExportRequest. A field of the wrong type is a 400 like everywhere; the values
    of group_by, severities and out are checked by the action (422), for the screen and the API alike."""

    group_by = StrictCharField(max_length=20, help_text="severity, month or none")
    severities = serializers.ListField(
        child=StrictCharField(max_length=20), help_text="severity keys: no_problem, warning, error, fatal, invalid"
    )
    out = StrictCharField(
        max_length=200, required=False, allow_null=True, allow_blank=True, default=None, trim_whitespace=False,
        help_text="a directory name inside EXPORT_ROOT; default (also when empty) <corpus>-<service>-<timestamp>",
    )  # fmt: skip


class ExportArchiveSerializer(serializers.Serializer):
    name = serializers.CharField()
    group = serializers.CharField(help_text="the severity, the month (yyyy-mm or unknown), or all")
    documents = serializers.IntegerField()
    missing = serializers.IntegerField(help_text="documents of this group whose result file was missing")
    bytes = serializers.IntegerField()
    url = serializers.CharField(help_text="token-gated download")


class ExportSerializer(serializers.Serializer):
    """A finished export as listed: its manifest without the document list."""

    out = serializers.CharField()
    corpus = serializers.CharField()
    service = serializers.CharField()
    group_by = serializers.CharField()
    severities = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    documents = serializers.IntegerField()
    missing = serializers.IntegerField()
    bytes = serializers.IntegerField()
    archives = ExportArchiveSerializer(many=True)
    manifest_url = serializers.CharField(help_text="token-gated download of manifest.json with the document list")


# --- sandbox corpora ------------------------------------------------------------------------------


class SandboxRequestSerializer(serializers.Serializer):
    """SandboxRequest: which of the parent's documents the sandbox takes."""

    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    service = StrictCharField(max_length=NAME_MAX, help_text="a service active on the parent")
    status = StrictCharField(
        max_length=20, required=False, help_text="a severity key: take tasks of its statuses (default: the severity's)"
    )
    severity = StrictCharField(max_length=20, required=False, help_text="a severity key: the tasks need such a message")
    category = StrictCharField(max_length=100, required=False, help_text="the message's category (needs severity)")
    what = StrictCharField(max_length=200, required=False, help_text="the message's what (needs category)")
    entry_contains = StrictCharField(max_length=1024, required=False, help_text="a substring of the document's entry")
    limit = StrictIntegerField(min_value=1, required=False, help_text="at most this many documents in all")
    per_class_limit = StrictIntegerField(
        min_value=1, required=False, help_text="at most this many documents per (severity, category, what) class"
    )
    seed = StrictIntegerField(
        default=0, min_value=-(2**31), max_value=2**31 - 1, help_text="the deterministic sample's seed"
    )
