"""Corpus DTOs and the request bodies of the corpora endpoints."""

from __future__ import annotations

from rest_framework import serializers

from config.api.fields import StrictCharField, StrictIntegerField, validate_plain_name
from config.api.paging import PageParamsSerializer
from config.links import LinkField
from config.names import NAME_MAX
from conversion.logparse import CATEGORY_MAX, WHAT_MAX
from corpora.export.queries import MANIFEST
from corpora.links import document_api_url, document_html_api_url, export_file_api_url
from corpora.statuses import STATUS_FILTERS


# The pair an answer is about, its first two fields: a subclass's own fields follow them. A comment, not a
# docstring: the OpenAPI document would take a docstring for the description of every subclass.
class PairSerializer(serializers.Serializer[object]):
    corpus = serializers.CharField()
    service = serializers.CharField()


class ImportRequestSerializer(serializers.Serializer[object]):
    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    path = StrictCharField(max_length=4096, help_text="a readable directory inside the corpus roots")
    description = StrictCharField(max_length=2000, required=False, allow_blank=True, default="")


class StatusCountsSerializer(serializers.Serializer[object]):
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


class CorpusServiceSerializer(serializers.Serializer[object]):
    name = serializers.CharField()
    protected = serializers.BooleanField()
    activated_at = serializers.DateTimeField(allow_null=True)
    counts = StatusCountsSerializer()
    served = serializers.BooleanField(
        help_text="a live worker serves it (always true for the infrastructure services, which need none)"
    )


class ServiceCountsSerializer(serializers.Serializer[object]):
    name = serializers.CharField()
    counts = StatusCountsSerializer()


class CorpusSerializer(serializers.Serializer[object]):
    """A corpus record as listed: its activated services by name, and each with its per-status counts."""

    name = serializers.CharField()
    description = serializers.CharField()
    state = serializers.CharField()
    # The stubs read a declared field as a class attribute, here one over Field.parent; DRF's metaclass pops it.
    parent = serializers.CharField(  # type: ignore[assignment]
        allow_null=True, help_text="the parent corpus of a sandbox"
    )
    documents = serializers.IntegerField()
    services = serializers.ListField(child=serializers.CharField(), help_text="activated services")
    service_counts = ServiceCountsSerializer(
        many=True, help_text="each activated service (in the order of `services`) with its per-status counts now"
    )
    created_at = serializers.DateTimeField()
    imported_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField()


class SandboxConditionSerializer(serializers.Serializer[object]):
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

    # DRF lets a subclass replace a declared field, or drop it with None; the stubs take them for attributes.
    services = CorpusServiceSerializer(many=True)  # type: ignore[assignment]
    service_counts = None  # type: ignore[assignment]  # the services carry their counts
    condition = SandboxConditionSerializer(allow_null=True, help_text="what a sandbox was carved with; null otherwise")


# --- a pair's documents ---------------------------------------------------------------------------


class DocumentListParamsSerializer(PageParamsSerializer):
    """The filters of a pair's document list, and its page."""

    status = serializers.ChoiceField(
        choices=list(STATUS_FILTERS), required=False, help_text="only the documents whose task has this status"
    )
    name_prefix = StrictCharField(
        max_length=255, required=False, help_text="only the documents whose name starts with this (any case)"
    )


class MessageClassSerializer(serializers.Serializer[object]):
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()


class DocumentRowSerializer(serializers.Serializer[object]):
    document = serializers.CharField(help_text="the document's name")
    entry = serializers.CharField(help_text="its entry in the corpus directory")
    status = serializers.CharField(help_text="its task's status for the service")
    runtime_ms = serializers.IntegerField(
        allow_null=True, help_text="how long its conversion took, in milliseconds; null until it has a result"
    )
    problem = MessageClassSerializer(
        allow_null=True, help_text="the class of its first error or fatal message, in log order; null without one"
    )
    has_html = serializers.BooleanField(help_text="whether its stored result holds HTML")
    report = LinkField(
        lambda row: document_api_url(row.corpus, row.service, row.document), help_text="the document report in the API"
    )
    html = LinkField(
        lambda row: document_html_api_url(row.corpus, row.service, row.document) if row.has_html else None,
        allow_null=True,
        help_text="its converted HTML in the API; null without HTML",
    )


class DocumentListSerializer(PairSerializer):
    """A page of a pair's documents, in the order of their names (case folded)."""

    status = serializers.CharField(allow_null=True)
    name_prefix = serializers.CharField(allow_null=True)
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    count = serializers.IntegerField(
        allow_null=True, help_text="the documents the filters take; null with name_prefix (not counted)"
    )
    documents = DocumentRowSerializer(many=True)


# --- dataset export -------------------------------------------------------------------------------


class ExportRequestSerializer(serializers.Serializer[object]):
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


class ExportArchiveSerializer(serializers.Serializer[object]):
    name = serializers.CharField()
    group = serializers.CharField(help_text="the severity, the month (yyyy-mm or unknown), or all")
    documents = serializers.IntegerField()
    missing = serializers.IntegerField(help_text="documents of this group whose result file was missing")
    bytes = serializers.IntegerField()
    url = LinkField(
        lambda archive: export_file_api_url(archive["out"], archive["name"]), help_text="token-gated download"
    )


class ExportSerializer(serializers.Serializer[object]):
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
    manifest_url = LinkField(
        lambda export: export_file_api_url(export["out"], MANIFEST),
        help_text="token-gated download of manifest.json with the document list",
    )


# --- sandbox corpora ------------------------------------------------------------------------------


class SandboxRequestSerializer(serializers.Serializer[object]):
    """SandboxRequest: which of the parent's documents the sandbox takes."""

    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    service = StrictCharField(max_length=NAME_MAX, help_text="a service active on the parent")
    status = StrictCharField(
        max_length=20, required=False, help_text="a severity key: take tasks of its statuses (default: the severity's)"
    )
    severity = StrictCharField(max_length=20, required=False, help_text="a severity key: the tasks need such a message")
    category = StrictCharField(
        max_length=CATEGORY_MAX, required=False, help_text="the message's category (needs severity)"
    )
    what = StrictCharField(max_length=WHAT_MAX, required=False, help_text="the message's what (needs category)")
    entry_contains = StrictCharField(max_length=1024, required=False, help_text="a substring of the document's entry")
    limit = StrictIntegerField(min_value=1, required=False, help_text="at most this many documents in all")
    per_class_limit = StrictIntegerField(
        min_value=1, required=False, help_text="at most this many documents per (severity, category, what) class"
    )
    seed = StrictIntegerField(
        default=0, min_value=-(2**31), max_value=2**31 - 1, help_text="the deterministic sample's seed"
    )
