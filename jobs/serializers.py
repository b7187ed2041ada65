"""Job DTOs: the one shape that both the API and the screens render."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.live import get_config
from jobs.choices import ACTIVE_STATES, FAILED_STATES, JobHealth
from jobs.models import Job


class JobProgressSerializer(serializers.Serializer[object]):
    current = serializers.IntegerField()
    total = serializers.IntegerField(allow_null=True)
    percent = serializers.FloatField(allow_null=True)


class JobSerializer(serializers.ModelSerializer[Job]):
    """A job record with its derived health and duration."""

    progress = serializers.SerializerMethodField()
    health = serializers.SerializerMethodField()
    duration_seconds = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "uuid", "kind", "state", "actor", "params", "progress", "message", "result", "log",
            "health", "duration_seconds", "created_at", "started_at", "finished_at", "heartbeat_at", "url",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(JobProgressSerializer)
    def get_progress(self, job: Job) -> dict[str, int | float | None]:
        total = job.progress_total
        percent = round(100.0 * job.progress_current / total, 1) if total else None
        return {"current": job.progress_current, "total": total, "percent": percent}

    @extend_schema_field(serializers.ChoiceField(choices=JobHealth.values))
    def get_health(self, job: Job) -> str:
        """failed for a job that failed or was interrupted; stalled when an active job has given no
        sign of life for longer than JOB_STALL_SECONDS; ok otherwise."""
        if job.state in FAILED_STATES:
            return JobHealth.FAILED
        if job.state in ACTIVE_STATES:
            last_sign = job.heartbeat_at or job.created_at
            if (timezone.now() - last_sign).total_seconds() > get_config().JOB_STALL_SECONDS:
                return JobHealth.STALLED
        return JobHealth.OK

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_duration_seconds(self, job: Job) -> float | None:
        if job.started_at is None:
            return None
        end = job.finished_at or timezone.now()
        return round((end - job.started_at).total_seconds(), 3)

    def get_url(self, job: Job) -> str:
        return f"/api/jobs/{job.uuid}"


class JobListParamsSerializer(serializers.Serializer[object]):
    """Query parameters of the jobs list; a limit above the maximum is reduced to it."""

    active = serializers.BooleanField(required=False, default=False)
    limit = serializers.IntegerField(required=False, default=settings.JOBS_PAGE_DEFAULT, min_value=1)

    def validate_limit(self, value: int) -> int:
        return min(value, settings.JOBS_PAGE_MAX)


class JobAckSerializer(serializers.Serializer[object]):
    """The answer to a request that starts a debounced job: the job, and whether it is a new one."""

    job = JobSerializer()
    created = serializers.BooleanField()
