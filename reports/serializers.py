"""DTOs of the reports app."""

from __future__ import annotations

from rest_framework import serializers

from config.api.fields import StrictCharField
from corpora.serializers import StatusCountsSerializer


class RunControlSerializer(serializers.Serializer):
    """The answer to pause or resume: which scope, and how many tasks were blocked or resumed."""

    corpus = serializers.CharField(allow_null=True)
    service = serializers.CharField(allow_null=True)
    action = serializers.ChoiceField(choices=["pause", "resume"])
    blocked = serializers.IntegerField(required=False)
    resumed = serializers.IntegerField(required=False)


class PercentagesSerializer(serializers.Serializer):
    todo = serializers.FloatField()
    queued = serializers.FloatField()
    no_problem = serializers.FloatField()
    warning = serializers.FloatField()
    error = serializers.FloatField()
    fatal = serializers.FloatField()
    blocked = serializers.FloatField()


class ServiceOverviewSerializer(serializers.Serializer):
    corpus = serializers.CharField()
    service = serializers.CharField()
    total = serializers.IntegerField()
    counts = StatusCountsSerializer()
    percentages = PercentagesSerializer(help_text="of all tasks but the invalid ones")
    run_in_progress = serializers.BooleanField()
    severities = serializers.ListField(child=serializers.CharField())


class MeaningFieldsMixin(serializers.Serializer):
    """A message category's meaning at the report's severity (the specification's message taxonomy)."""

    meaning = serializers.CharField(
        allow_null=True, required=False, help_text="what the category means; null where the taxonomy does not say"
    )
    what_names = serializers.CharField(
        allow_null=True, required=False, help_text="what the category's whats name: a file name, a command name..."
    )


class ReportRowSerializer(MeaningFieldsMixin):
    """A category row (with its meaning) or a what row (without)."""

    name = serializers.CharField()
    tasks = serializers.IntegerField()
    messages = serializers.IntegerField()
    task_percent = serializers.FloatField()
    message_percent = serializers.FloatField()


class GrainReportSerializer(MeaningFieldsMixin):
    """A category report (one row per category) or, with `category` set, a what report (with the
    category's meaning)."""

    corpus = serializers.CharField()
    service = serializers.CharField()
    severity = serializers.CharField()
    category = serializers.CharField(required=False)
    computing = serializers.BooleanField(help_text="true while the rollup is built in the background")
    count = serializers.IntegerField(help_text="rows in all pages")
    tasks = serializers.IntegerField()
    messages = serializers.IntegerField()
    tasks_without_messages = serializers.IntegerField(allow_null=True)
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    rows = ReportRowSerializer(many=True)


class EntrySerializer(serializers.Serializer):
    document = serializers.CharField()
    status = serializers.CharField()
    details = serializers.CharField(allow_blank=True)


class EntryListSerializer(serializers.Serializer):
    corpus = serializers.CharField()
    service = serializers.CharField()
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    entries = EntrySerializer(many=True)


class MessageSerializer(serializers.Serializer):
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()
    details = serializers.CharField(allow_blank=True)


class ExplainedMessageSerializer(MessageSerializer, MeaningFieldsMixin):
    pass


class ExplanationSerializer(serializers.Serializer):
    """A document's conversion in words (reports.queries.document_explanation)."""

    summary = serializers.CharField()
    causes = ExplainedMessageSerializer(many=True, help_text="the fatal messages, or else the first errors")
    missing_files = serializers.ListField(
        child=serializers.CharField(), help_text="files and packages that could not be loaded (missing_file whats)"
    )


class DocumentReportSerializer(serializers.Serializer):
    corpus = serializers.CharField()
    service = serializers.CharField()
    document = serializers.CharField()
    entry = serializers.CharField()
    explanation = ExplanationSerializer()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    runtime_ms = serializers.IntegerField(allow_null=True)
    messages = MessageSerializer(many=True)
    result_url = serializers.CharField(allow_null=True)
    html_url = serializers.CharField(allow_null=True)


class HistogramBucketSerializer(serializers.Serializer):
    lt_ms = serializers.IntegerField(allow_null=True, help_text="upper bound (exclusive); null for the last")
    count = serializers.IntegerField()


class SlowConversionSerializer(serializers.Serializer):
    corpus = serializers.CharField()
    document = serializers.CharField()
    runtime_ms = serializers.IntegerField()


class RuntimeReportSerializer(serializers.Serializer):
    service = serializers.CharField()
    count = serializers.IntegerField()
    mean_ms = serializers.FloatField(allow_null=True)
    p50_ms = serializers.IntegerField(allow_null=True)
    p90_ms = serializers.IntegerField(allow_null=True)
    p99_ms = serializers.IntegerField(allow_null=True)
    max_ms = serializers.IntegerField(allow_null=True)
    histogram = HistogramBucketSerializer(many=True)
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    slowest = SlowConversionSerializer(many=True)


class RerunAckSerializer(serializers.Serializer):
    corpus = serializers.CharField()
    service = serializers.CharField()
    severity = serializers.CharField(allow_null=True)
    category = serializers.CharField(allow_null=True)
    what = serializers.CharField(allow_null=True)
    tasks = serializers.IntegerField(help_text="tasks set back to TODO")
    run_id = serializers.IntegerField()


class ScopeRefreshSerializer(serializers.Serializer):
    corpus = serializers.CharField()
    service = serializers.CharField()
    cleared_slices = serializers.IntegerField()


class RerunParamsSerializer(serializers.Serializer):
    """The slice to rerun; an empty severity, category or what means not narrowed by it."""

    severity = StrictCharField(required=False, allow_blank=True, help_text="a severity key; empty or left out: all")
    category = StrictCharField(required=False, allow_blank=True, max_length=100)
    what = StrictCharField(required=False, allow_blank=True, max_length=200)
    description = StrictCharField(required=False, allow_blank=True, max_length=2000, default="")

    def validate(self, attrs: dict) -> dict:
        return {key: value for key, value in attrs.items() if value != "" or key == "description"}
