from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import StrictCharField
from jobs.choices import FAILED_STATES, JobHealth, JobState
from jobs.models import Job
from ops.choices import ConfigSource, HealthStatus, LogLevel, Readiness
from ops.health import CHECK_NAMES
from runs.serializers import CurrentRunSerializer, RunSerializer, TalliesField
from services.serializers import ServiceInFlightSerializer


class DatabaseReachSerializer(serializers.Serializer[object]):
    reachable = serializers.BooleanField()


class LivenessSerializer(serializers.Serializer[object]):
    status = serializers.ChoiceField(choices=Readiness.values)
    database = DatabaseReachSerializer()


# --- status and statistics ---


class FleetSerializer(serializers.Serializer[object]):
    service = serializers.CharField()
    workers = serializers.IntegerField(help_text="worker identities that asked for work within active_worker_seconds")
    last_seen = serializers.DateTimeField()


class BacklogSerializer(serializers.Serializer[object]):
    todo = serializers.IntegerField()
    queued = serializers.IntegerField(help_text="leased to a worker, result not yet ingested")
    total = serializers.IntegerField()


class StatusSerializer(serializers.Serializer[object]):
    corpora = serializers.IntegerField()
    workers = FleetSerializer(many=True, help_text="the active worker fleet, per service")
    active_worker_seconds = serializers.IntegerField(help_text="a worker seen within this many seconds is active")
    backlog = BacklogSerializer(help_text="pending conversions (every service but the infrastructure ones)")
    latest_run = RunSerializer(allow_null=True)


class ServiceBacklogSerializer(BacklogSerializer):
    service = serializers.CharField()


class DashboardJobSerializer(serializers.Serializer[object]):
    """A job in trouble as the public dashboard shows it: its message and result stay behind GET /api/jobs."""

    uuid = serializers.UUIDField()
    kind = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    health = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    last_sign = serializers.DateTimeField(help_text="the job's last heartbeat, or its creation")

    @extend_schema_field(serializers.ChoiceField(choices=[JobHealth.STALLED, JobHealth.FAILED]))
    def get_health(self, job: Job) -> str:
        """failed for a job that failed or was interrupted, else stalled (jobs.queries.jobs_in_trouble)."""
        return JobHealth.FAILED if job.state in FAILED_STATES else JobHealth.STALLED


class HealthProblemSerializer(serializers.Serializer[object]):
    name = serializers.ChoiceField(choices=CHECK_NAMES)
    status = serializers.ChoiceField(choices=[HealthStatus.WARNING, HealthStatus.PROBLEM])


class DashboardHealthSerializer(serializers.Serializer[object]):
    status = serializers.ChoiceField(choices=HealthStatus.values, help_text="the worst check's status")
    problems = HealthProblemSerializer(many=True, help_text="the checks that are not ok; details: GET /api/health")


class DashboardSerializer(StatusSerializer):
    open_runs = CurrentRunSerializer(many=True, help_text="every open run, oldest first, with live tallies and ETA")
    backlog_per_service = ServiceBacklogSerializer(many=True, help_text="services with tasks TODO or queued")
    jobs = DashboardJobSerializer(many=True, help_text="stalled jobs and jobs failed within failed_jobs_hours")
    failed_jobs_hours = serializers.IntegerField()
    health = DashboardHealthSerializer()
    in_flight = serializers.IntegerField(help_text="conversions in flight now, from the workers' heartbeats")
    in_flight_past_p99 = serializers.IntegerField(help_text="of them, those past their service's p99 runtime")
    in_flight_longest = ServiceInFlightSerializer(
        many=True, help_text="the longest running conversions in flight (at most 10), longest first"
    )


class TrendPointSerializer(serializers.Serializer[object]):
    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_seconds = serializers.FloatField()
    completed = serializers.IntegerField(help_text="completed tasks in the run's frozen tallies")
    tallies = TalliesField()


class PairStatisticsSerializer(serializers.Serializer[object]):
    corpus = serializers.CharField()
    service = serializers.CharField()
    runs = serializers.IntegerField(help_text="closed runs")
    mean_duration_seconds = serializers.FloatField()
    last_duration_seconds = serializers.FloatField()
    tasks_per_hour = serializers.FloatField(
        allow_null=True, help_text="completed tasks of the runs' frozen tallies per hour of their summed durations"
    )
    trend = TrendPointSerializer(many=True, help_text="the latest closed runs (at most 20), oldest first")


class StatisticsParamsSerializer(serializers.Serializer[object]):
    corpus = StrictCharField(required=False, max_length=100)
    service = StrictCharField(required=False, max_length=100)


# --- detailed health ---


class HealthCheckSerializer(serializers.Serializer[object]):
    name = serializers.ChoiceField(choices=CHECK_NAMES)
    status = serializers.ChoiceField(choices=HealthStatus.values)
    summary = serializers.CharField()
    remediation = serializers.CharField(allow_null=True, help_text="What to do about it; null when the check is ok")
    details = serializers.DictField(help_text="The check's figures (counts, paths, ports, free bytes, versions)")


class HealthSerializer(serializers.Serializer[object]):
    status = serializers.ChoiceField(choices=HealthStatus.values, help_text="The worst check's status")
    checked_at = serializers.DateTimeField()
    checks = HealthCheckSerializer(many=True)


# --- logs ---
class LogsParamsSerializer(serializers.Serializer[object]):
    level = serializers.ChoiceField(
        choices=LogLevel.values, default=LogLevel.INFO,
        help_text="minimum level; DEBUG adds Celery's routine lines (beat's due tasks, tasks received or succeeded)",
    )  # fmt: skip
    process = StrictCharField(required=False, max_length=100, help_text="web, celery-worker, dispatcher, ...")
    logger = StrictCharField(
        required=False, max_length=200, help_text="a logger and its children: celery matches celery.beat"
    )
    request_id = StrictCharField(required=False, max_length=200)
    before = serializers.RegexField(
        r"^\d{1,19}-\d{1,19}$", required=False, help_text="cursor: next_before of the previous page"
    )
    limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=500)


class LogRecordSerializer(serializers.Serializer[object]):
    id = serializers.CharField(help_text="stream id (the page cursor)")
    time = serializers.DateTimeField()
    level = serializers.CharField()
    logger = serializers.CharField()
    process = serializers.CharField(help_text="the process's role under `up`, else its command")
    pid = serializers.IntegerField()
    request_id = serializers.CharField(help_text="request id, job-<id> in a job, - outside both")
    message = serializers.CharField(help_text="tokens masked")


class LogSourcesSerializer(serializers.Serializer[object]):
    processes = serializers.ListField(child=serializers.CharField())
    loggers = serializers.ListField(child=serializers.CharField())


class LogsSerializer(serializers.Serializer[object]):
    records = LogRecordSerializer(many=True, help_text="newest first")
    next_before = serializers.CharField(allow_null=True, help_text="cursor of the next (older) page; null at the end")


# --- configuration ---
class ConfigEntrySerializer(serializers.Serializer[object]):
    key = serializers.CharField(help_text="Dotted name, e.g. dispatcher.max_in_flight")
    value = serializers.JSONField(help_text="The effective value; secrets masked, tokens only as a count")
    # The serializer's metaclass takes its fields out of the class, so this one does not shadow Field.source as
    # the stubs (which cannot see that) say.
    source = serializers.ChoiceField(choices=ConfigSource.values)  # type: ignore[assignment]
    live = serializers.BooleanField(help_text="A change takes effect in running processes within seconds")
    settable = serializers.BooleanField(help_text="Settable through PUT /api/config (else environment only)")
    running = serializers.JSONField(help_text="The value the answering web process runs with")
    restart_pending = serializers.BooleanField(
        help_text="The value differs from the running one until the processes restart (not a live key)"
    )
    description = serializers.CharField(read_only=True, help_text="What the key governs, in a sentence")


class ConfigSerializer(serializers.Serializer[object]):
    entries = ConfigEntrySerializer(many=True)


class ConfigChangeSerializer(serializers.Serializer[object]):
    before = serializers.DictField(child=serializers.JSONField())
    after = serializers.DictField(child=serializers.JSONField())
    restart_required = serializers.ListField(child=serializers.CharField())
    configuration = ConfigSerializer()
