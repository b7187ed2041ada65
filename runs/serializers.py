"""DTOs of runs, snapshots, diffs and converter comparisons, and the query parameters they take."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import StrictCharField
from config.api.paging import PageParamsSerializer
from config.errors import BadRequest
from config.links import LinkField
from corpora.choices import TIMED_STAGES
from corpora.queries.eta import RATE_WINDOW
from corpora.queries.prune import CUTOFF_HELP, prune_cutoff
from corpora.serializers import PairSerializer, StatusCountsSerializer
from corpora.statuses import DIFF_BUCKETS
from runs.links import document_api_url, document_history_url, document_url
from services.serializers import ProfileSerializer

STATUS_HELP = f"one of {', '.join(DIFF_BUCKETS)}"
CHANGE_HELP = "regressed: only transitions to a worse completed status (no_problem -> warning, error -> fatal, ...)"


@extend_schema_field(StatusCountsSerializer(allow_null=True))
class TalliesField(serializers.JSONField):
    """A run's per-status counts as stored (corpora.queries.corpora.status_counts), passed through as they are:
    a nested serializer for each run of a 500-run history page costs more than that page can spare
    (bench/README.md, runs); the schema still documents the StatusCounts shape."""


@extend_schema_field(ProfileSerializer(allow_null=True))
class ProfileJsonField(serializers.JSONField):
    """A run's converter profile as stored (conversion.profiles.Profile.as_json), passed through as it is for
    the same reason as TalliesField; null for a run opened before runs recorded it."""


PROFILE_HASHES_HELP = "every profile hash the service had while the run was open, in order; more than one: it changed"
ENGINE_VERSIONS_HELP = "the versions of the engine the fleet's workers reported while the run was open"


class RunProfileSerializer(serializers.Serializer[object]):
    """How a run's tasks were converted: the engine, the versions the fleet reported, the profile."""

    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    engine = serializers.CharField(allow_blank=True, help_text="the profile's engine; empty for an older run")
    engine_versions = serializers.ListField(child=serializers.CharField(), help_text=ENGINE_VERSIONS_HELP)
    profile = ProfileJsonField(allow_null=True, help_text="the service's profile when the run opened")
    profile_hash = serializers.CharField(allow_blank=True, help_text="sha256 of that profile's canonical JSON")
    profile_hashes = serializers.ListField(child=serializers.CharField(), help_text=PROFILE_HASHES_HELP)
    profile_changed = serializers.BooleanField(help_text="the service's profile changed while the run was open")


class RunSerializer(serializers.Serializer[object]):
    id = serializers.IntegerField()
    corpus = serializers.CharField()
    service = serializers.CharField()
    owner = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    open = serializers.BooleanField()
    tallies = TalliesField(allow_null=True, help_text="frozen at the close; live while the run is open")
    snapshot_at = serializers.DateTimeField(allow_null=True, help_text="the snapshot taken when the run closed")
    engine = serializers.CharField(allow_blank=True, help_text="the profile's engine; empty for an older run")
    engine_versions = serializers.ListField(child=serializers.CharField(), help_text=ENGINE_VERSIONS_HELP)
    profile = ProfileJsonField(allow_null=True, help_text="the service's profile when the run opened")
    profile_hash = serializers.CharField(allow_blank=True, help_text="sha256 of that profile's canonical JSON")
    profile_hashes = serializers.ListField(child=serializers.CharField(), help_text=PROFILE_HASHES_HELP)
    profile_changed = serializers.BooleanField(help_text="the service's profile changed while the run was open")


class EtaSerializer(serializers.Serializer[object]):
    """An open run's ETA (corpora.queries.eta): remaining / recent rate."""

    remaining = serializers.IntegerField(help_text="tasks TODO or leased")
    rate_per_minute = serializers.FloatField(allow_null=True, help_text=RATE_WINDOW + "; null with none applied")
    rate_since = serializers.DateTimeField(help_text="the start of the rate's window")
    recent_completed = serializers.IntegerField(help_text="results applied in the rate's window")
    eta_seconds = serializers.FloatField(allow_null=True, help_text="remaining / rate; 0 when nothing is left")
    finishes_at = serializers.DateTimeField(allow_null=True)
    stalled = serializers.CharField(
        allow_null=True, help_text="why it cannot finish as things are (no live worker serves the service), or null"
    )


class CurrentRunSerializer(RunSerializer):
    eta = EtaSerializer()


class PercentileSerializer(serializers.Serializer[object]):
    ms = serializers.FloatField(help_text="the geometric middle of the bin holding the percentile")
    from_ms = serializers.FloatField()
    to_ms = serializers.FloatField()


class HistogramBinSerializer(serializers.Serializer[object]):
    from_ms = serializers.FloatField()
    to_ms = serializers.FloatField(help_text="exclusive")
    count = serializers.IntegerField()


class StageSerializer(serializers.Serializer[object]):
    stage = serializers.ChoiceField(choices=[stage.label for stage in TIMED_STAGES])
    count = serializers.IntegerField()
    p50 = PercentileSerializer(allow_null=True)
    p90 = PercentileSerializer(allow_null=True)
    p99 = PercentileSerializer(allow_null=True)
    histogram = HistogramBinSerializer(many=True, help_text="non-empty log-scale bins, shortest first")


class TelemetryRunSerializer(serializers.Serializer[object]):
    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    stages = StageSerializer(many=True)


class ThroughputMinuteSerializer(serializers.Serializer[object]):
    minute = serializers.DateTimeField()
    completed = serializers.IntegerField(help_text="results applied in that minute")


class TelemetrySerializer(PairSerializer):
    precision = serializers.CharField()
    open_run = TelemetryRunSerializer(allow_null=True)
    last_closed_run = TelemetryRunSerializer(allow_null=True)
    throughput = ThroughputMinuteSerializer(many=True, help_text="the open run's minutes with results applied")
    eta = EtaSerializer(allow_null=True, help_text="null without an open run")
    rate_window = serializers.CharField()


class MemoryPercentileSerializer(serializers.Serializer[object]):
    mib = serializers.FloatField(help_text="the geometric middle of the bin holding the percentile, MiB")
    from_mib = serializers.FloatField()
    to_mib = serializers.FloatField()


class MemoryBinSerializer(serializers.Serializer[object]):
    from_mib = serializers.FloatField()
    to_mib = serializers.FloatField(help_text="exclusive")
    count = serializers.IntegerField()


class PeakMemorySerializer(serializers.Serializer[object]):
    count = serializers.IntegerField(help_text="conversions whose peak memory was measured")
    p50 = MemoryPercentileSerializer(allow_null=True)
    p90 = MemoryPercentileSerializer(allow_null=True)
    p99 = MemoryPercentileSerializer(allow_null=True)
    max = MemoryPercentileSerializer(allow_null=True, help_text="the bin of the largest peak")
    histogram = MemoryBinSerializer(many=True, help_text="non-empty log-scale bins, smallest first")


class ProjectionSerializer(serializers.Serializer[object]):
    papers = serializers.IntegerField()
    core_hours = serializers.FloatField(allow_null=True, help_text="null while no CPU time was measured")


class ProjectionsSerializer(serializers.Serializer[object]):
    corpus = ProjectionSerializer(help_text="the pair's corpus: its tasks")
    arxiv = ProjectionSerializer(help_text="arXiv's papers")


class RunCostSerializer(serializers.Serializer[object]):
    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    results = serializers.IntegerField(help_text="results applied in the run")
    measured = serializers.IntegerField(help_text="those of them that carried their CPU time")
    cpu_seconds = serializers.FloatField(help_text="CPU time of the measured conversions together")
    cpu_seconds_per_paper = serializers.FloatField(allow_null=True)
    papers_per_core_hour = serializers.FloatField(allow_null=True)
    peak_memory = PeakMemorySerializer()
    projections = ProjectionsSerializer(help_text="core-hours for the corpus and for arXiv at this rate")


class CostSerializer(PairSerializer):
    precision = serializers.CharField()
    open_run = RunCostSerializer(allow_null=True)
    last_closed_run = RunCostSerializer(allow_null=True)


class RunListParamsSerializer(serializers.Serializer[object]):
    corpus = StrictCharField(required=False, max_length=100)
    service = StrictCharField(required=False, max_length=100)
    owner = StrictCharField(required=False, max_length=100)
    limit = serializers.IntegerField(required=False, help_text="default 100, at most 500 (more is reduced to it)")

    def validate_limit(self, value: int) -> int:
        if value < 1:
            raise serializers.ValidationError("at least 1")
        return value


class PairRunsParamsSerializer(serializers.Serializer[object]):
    limit = serializers.IntegerField(required=False, min_value=1, help_text="default 100, at most 500")


class SnapshotAckSerializer(PairSerializer):
    taken_at = serializers.DateTimeField(help_text="the snapshot's date, as available_dates of the diff lists it")
    rows = serializers.IntegerField(help_text="rows appended: one per task of the pair")


class DiffParamsSerializer(serializers.Serializer[object]):
    previous = serializers.DateTimeField(required=False, help_text="a snapshot date from available_dates")
    current = serializers.DateTimeField(required=False, help_text="a snapshot date from available_dates")


EXCLUDE_DOCUMENTS_HELP = (
    "leave out the documents that were an infrastructure failure (Fatal:infrastructure) in either snapshot: "
    "the machine's doing, not the converter's"
)


class RunDiffParamsSerializer(DiffParamsSerializer):
    exclude_infrastructure = serializers.BooleanField(required=False, help_text=EXCLUDE_DOCUMENTS_HELP)


class TaskDiffParamsSerializer(RunDiffParamsSerializer, PageParamsSerializer):
    previous_status = StrictCharField(required=False, max_length=20, help_text=STATUS_HELP)
    current_status = StrictCharField(required=False, max_length=20, help_text=STATUS_HELP)
    change = serializers.ChoiceField(choices=["regressed"], required=False, help_text=CHANGE_HELP)


class DiffCellSerializer(serializers.Serializer[object]):
    previous = serializers.CharField()
    current = serializers.CharField()
    count = serializers.IntegerField()
    regression = serializers.BooleanField()


class RunDiffSerializer(PairSerializer):
    available_dates = serializers.ListField(child=serializers.DateTimeField(), help_text="newest first")
    previous = serializers.DateTimeField(allow_null=True)
    current = serializers.DateTimeField(allow_null=True)
    total = serializers.IntegerField(help_text="documents in either snapshot")
    changed = serializers.IntegerField()
    regressions = serializers.IntegerField()
    matrix = DiffCellSerializer(many=True, help_text="previous status x current status -> documents")
    exclude_infrastructure = serializers.BooleanField(
        help_text="whether the infrastructure failures' documents are left out of total, changed, regressions and "
        "matrix"
    )
    infrastructure = serializers.IntegerField(
        help_text="documents that were an infrastructure failure (Fatal:infrastructure) in either snapshot"
    )
    previous_run = RunProfileSerializer(
        allow_null=True, help_text="the run open when the previous snapshot was taken (its close takes one)"
    )
    current_run = RunProfileSerializer(allow_null=True, help_text="the run open when the current snapshot was taken")


class TaskDiffSerializer(serializers.Serializer[object]):
    document = serializers.CharField()
    previous_status = serializers.CharField()
    current_status = serializers.CharField()
    regression = serializers.BooleanField()
    report = LinkField(
        lambda row: document_api_url(row.corpus, row.service, row.document), help_text="the document report in the API"
    )


class CompareParamsSerializer(PageParamsSerializer):
    status_a = StrictCharField(required=False, max_length=20, help_text=STATUS_HELP)
    status_b = StrictCharField(required=False, max_length=20, help_text=STATUS_HELP)
    change = serializers.ChoiceField(choices=["regressed"], required=False, help_text=CHANGE_HELP)


class ComparePickSerializer(serializers.Serializer[object]):
    """The corpus screen's comparison form: two services of the corpus (a screen of its own, no API twin)."""

    service_a = StrictCharField(max_length=100)
    service_b = StrictCharField(max_length=100)


class CompareCellSerializer(serializers.Serializer[object]):
    status_a = serializers.CharField()
    status_b = serializers.CharField()
    count = serializers.IntegerField()
    regression = serializers.BooleanField(help_text="B's status is worse than A's")


class CompareSideSerializer(serializers.Serializer[object]):
    """How one of the two services converts: its profile now, and the profile, engine and versions of its
    latest run on the corpus (which made the statuses compared)."""

    service = serializers.CharField()
    engine = serializers.CharField(help_text="the engine of its profile now")
    profile = ProfileSerializer(help_text="its profile now")
    profile_hash = serializers.CharField()
    profile_preset = serializers.CharField(allow_null=True, help_text="the preset its profile equals, or null")
    run = RunProfileSerializer(allow_null=True, help_text="its latest run on the corpus, open or closed")


class CompareSerializer(serializers.Serializer[object]):
    corpus = serializers.CharField()
    service_a = serializers.CharField()
    service_b = serializers.CharField()
    total = serializers.IntegerField()
    differ = serializers.IntegerField()
    regressions = serializers.IntegerField()
    matrix = CompareCellSerializer(many=True, help_text="A's status x B's status -> documents")
    profile_a = CompareSideSerializer(help_text="how A converts")
    profile_b = CompareSideSerializer(help_text="how B converts")


class CompareTaskSerializer(serializers.Serializer[object]):
    document = serializers.CharField()
    status_a = serializers.CharField()
    status_b = serializers.CharField()
    regression = serializers.BooleanField()
    report_a = LinkField(lambda task: document_api_url(task.corpus, task.service_a, task.document))
    report_b = LinkField(lambda task: document_api_url(task.corpus, task.service_b, task.document))


# --- message classes between two snapshots, and a document's history --------------------------------

KIND_HELP = (
    "appeared, vanished, grew or shrank (by the class's task count), increased (appeared or grew) or decreased "
    "(vanished or shrank); absent: every class whose task count changed"
)
SEVERITY_FILTER_HELP = "message severities separated by commas (info, warning, error, fatal); absent: all"


class ClassDiffParamsSerializer(DiffParamsSerializer, PageParamsSerializer):
    kind = StrictCharField(required=False, max_length=20, help_text=KIND_HELP)
    severity = StrictCharField(required=False, max_length=40, help_text=SEVERITY_FILTER_HELP)
    exclude_infrastructure = serializers.BooleanField(
        required=False,
        help_text="leave out the infrastructure failures' classes (Fatal:infrastructure): the "
        "machine's doing, not the converter's",
    )


class ClassChangeSerializer(serializers.Serializer[object]):
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()
    meaning = serializers.CharField(allow_null=True, help_text="the category's meaning at the severity")
    kind = serializers.CharField(help_text="appeared, vanished, grew or shrank (by the class's task count)")
    previous_tasks = serializers.IntegerField()
    current_tasks = serializers.IntegerField()
    change = serializers.IntegerField(help_text="current_tasks - previous_tasks")
    previous_messages = serializers.IntegerField()
    current_messages = serializers.IntegerField()
    documents_listed = serializers.BooleanField(
        help_text="whether the gained and lost documents can be listed (warning severity or worse)"
    )


class ClassTasksParamsSerializer(DiffParamsSerializer, PageParamsSerializer):
    change = StrictCharField(max_length=10, help_text="gained (only in current) or lost (only in previous)")


class ClassTaskSerializer(serializers.Serializer[object]):
    document = serializers.CharField()
    change = serializers.CharField()
    report_url = LinkField(
        lambda task: document_url(task.corpus, task.service, task.document), help_text="the document's screen"
    )
    document_api_url = LinkField(
        lambda task: document_api_url(task.corpus, task.service, task.document),
        help_text="the document report in the API",
    )
    history_url = LinkField(
        lambda task: document_history_url(task.corpus, task.service, task.document),
        help_text="the document's history screen",
    )


class HistoryClassSerializer(serializers.Serializer[object]):
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()
    meaning = serializers.CharField(allow_null=True)


class HistoryRunSerializer(serializers.Serializer[object]):
    id = serializers.IntegerField()
    owner = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    open = serializers.BooleanField()


class HistoryEntrySerializer(serializers.Serializer[object]):
    taken_at = serializers.DateTimeField(allow_null=True, help_text="the snapshot's date; null for the live state")
    live = serializers.BooleanField(help_text="the document now, while a run of its pair is open")
    run = HistoryRunSerializer(allow_null=True, help_text="the run the snapshot closed, or the run open then")
    status = serializers.CharField()
    classes_known = serializers.BooleanField(
        help_text="false for a snapshot taken before snapshots froze message classes: `classes` says nothing then"
    )
    classes = serializers.ListField(
        child=serializers.BooleanField(), help_text="for each of `classes`, whether the document had it then"
    )


class DocumentHistorySerializer(PairSerializer):
    document = serializers.CharField()
    report_url = LinkField(lambda history: document_url(history.corpus, history.service, history.document))
    classes = HistoryClassSerializer(many=True, help_text="every warning, error or fatal class it had, worst first")
    entries = HistoryEntrySerializer(many=True, help_text="newest first")


# --- pruning (a human action: the command and the retention screen, never the API) ---------------


class PruneParamsSerializer(serializers.Serializer[object]):
    before = StrictCharField(max_length=40, help_text=CUTOFF_HELP)
    corpus = StrictCharField(required=False, allow_blank=True, max_length=100)
    service = StrictCharField(required=False, allow_blank=True, max_length=100)

    def validate_before(self, value: str) -> datetime:
        try:
            return prune_cutoff(value)
        except BadRequest as exc:
            raise serializers.ValidationError(exc.detail) from exc

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {**attrs, "corpus": attrs.get("corpus") or None, "service": attrs.get("service") or None}


class PruneCountsSerializer(serializers.Serializer[object]):
    runs = serializers.IntegerField()
    snapshots = serializers.IntegerField()
    diffs = serializers.IntegerField()
    diff_rows = serializers.IntegerField(help_text="changed-document rows of the removed diffs")
    bytes = serializers.IntegerField(help_text="disk the removed rows occupy (reused after autovacuum)")


class PrunePairSerializer(PruneCountsSerializer):
    corpus = serializers.CharField()
    service = serializers.CharField()


class PruneSummarySerializer(serializers.Serializer[object]):
    before = serializers.DateTimeField()
    corpus = serializers.CharField(allow_null=True)
    service = serializers.CharField(allow_null=True)
    pairs = PrunePairSerializer(many=True)
    total = PruneCountsSerializer()


# --- package attribution (corpora.queries.packages) ----------------------------------------------------


class PackageParamsSerializer(PageParamsSerializer):
    run = serializers.IntegerField(required=False, min_value=1, help_text="a run of the pair (default: the tasks now)")
    kind = StrictCharField(required=False, max_length=10, help_text="package or class")


class PackageRowSerializer(serializers.Serializer[object]):
    kind = serializers.CharField(help_text="package (.sty) or class (.cls)")
    package = serializers.CharField()
    papers = serializers.IntegerField(help_text="papers whose log names it (loaded, missing or erring in it)")
    statuses = serializers.DictField(child=serializers.IntegerField(), help_text="those papers by status")
    only_missing = serializers.IntegerField(help_text="papers whose only missing or unsupported dependency it is")
    clears = serializers.IntegerField(
        help_text="papers that would be error-free without its messages: every error and fatal located in it"
    )
    clears_weak = serializers.IntegerField(help_text="the same when weak (inferred) attributions count too")
    evidence = serializers.ListField(
        child=serializers.CharField(), help_text="kinds of evidence among its papers, strongest first; weak apart"
    )


class PackageRankingSerializer(PairSerializer):
    run = serializers.IntegerField(allow_null=True, help_text="the run read, or null for the tasks now")
    taken_at = serializers.DateTimeField(allow_null=True, help_text="the run's snapshot, or null when read live")
    count = serializers.IntegerField(help_text="packages in all")
    rows = PackageRowSerializer(many=True)


class PackagePaperSerializer(serializers.Serializer[object]):
    document = serializers.CharField()
    status = serializers.CharField()
    only_missing = serializers.BooleanField()
    clears = serializers.BooleanField()
    clears_weak = serializers.BooleanField()
    evidence = serializers.ListField(child=serializers.CharField())
    url = LinkField(lambda paper: document_url(paper.corpus, paper.service, paper.document))
    api_url = LinkField(lambda paper: document_api_url(paper.corpus, paper.service, paper.document))


class PackageDiffParamsSerializer(DiffParamsSerializer, PageParamsSerializer):
    pass


class PackageChangeSerializer(serializers.Serializer[object]):
    kind = serializers.CharField()
    package = serializers.CharField()
    previous_papers = serializers.IntegerField()
    current_papers = serializers.IntegerField()
    gained = serializers.ListField(child=serializers.CharField(), help_text="documents gained (the first 20)")
    lost = serializers.ListField(child=serializers.CharField(), help_text="documents lost (the first 20)")
    gained_count = serializers.IntegerField()
    lost_count = serializers.IntegerField()
    previous_clears = serializers.IntegerField()
    current_clears = serializers.IntegerField()


class PackageDiffSerializer(PairSerializer):
    available_dates = serializers.ListField(child=serializers.DateTimeField())
    previous = serializers.DateTimeField(allow_null=True)
    current = serializers.DateTimeField(allow_null=True)
    changes = PackageChangeSerializer(many=True)


def package_export_chunks(batches: Iterator[list[tuple[Any, ...]]], header: tuple[str, ...]) -> Iterator[bytes]:
    """The rows of a package export as CSV bytes, a header line first, one chunk a batch."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for batch in batches:
        writer.writerows(batch)
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()
