"""Service DTOs and the request bodies of the services endpoints."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import StrictCharField, StrictIntegerField, validate_plain_name
from config.names import NAME_MAX
from services.models import Service, Worker
from services.queries import effective_lease_seconds, kills_by_reason, service_get


class ServiceSerializer(serializers.ModelSerializer):
    protected = serializers.BooleanField(source="is_protected")
    effective_lease_seconds = serializers.SerializerMethodField()
    corpora = serializers.IntegerField(source="corpus_count", help_text="corpora it is activated on")
    url = serializers.SerializerMethodField()

    class Meta:
        model = Service
        fields = [
            "name", "version", "inputformat", "outputformat", "command", "description", "lease_seconds",
            "effective_lease_seconds", "protected", "corpora", "created_at", "url",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField())
    def get_effective_lease_seconds(self, service: Service) -> int:
        return effective_lease_seconds(service)

    def get_url(self, service: Service) -> str:
        return f"/api/services/{service.name}"


class ServiceRegisterRequestSerializer(serializers.Serializer):
    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    version = StrictCharField(max_length=50, required=False)
    inputformat = serializers.ChoiceField(choices=["tex"], required=False)
    outputformat = serializers.ChoiceField(choices=["html"], required=False)
    command = StrictCharField(max_length=500, required=False, allow_blank=True)
    description = StrictCharField(max_length=2000, required=False, allow_blank=True)
    lease_seconds = StrictIntegerField(min_value=1, max_value=2_000_000_000, required=False, allow_null=True)


class LeaseUpdateRequestSerializer(serializers.Serializer):
    seconds = serializers.IntegerField(
        min_value=1, max_value=2_000_000_000, allow_null=True, help_text="positive seconds, or null to clear"
    )

    def to_internal_value(self, data: object) -> dict:
        # "5" or 5.0 are not whole seconds given as a number: the body must carry a JSON integer or null.
        value = data.get("seconds") if isinstance(data, dict) else None
        if isinstance(value, bool) or (value is not None and not isinstance(value, int)):
            raise serializers.ValidationError({"seconds": ["must be a positive whole number, or null"]})
        return super().to_internal_value(data)


def lease_request(service: str, data: Any) -> LeaseUpdateRequestSerializer:
    """The lease input of a service that exists: an unknown service is the first thing to say (404 before
    400), on the screen as on the API."""
    service_get(service)
    return LeaseUpdateRequestSerializer(data=data)


class WorkerKillsSerializer(serializers.Serializer):
    """A worker's killed conversions by reason (conversion.engine.KILL_REASONS), every reason present."""

    timeout = serializers.IntegerField(help_text="past the conversion timeout")
    memory = serializers.IntegerField(help_text="past the conversion's memory limit")
    processes = serializers.IntegerField(help_text="past the conversion's process limit")
    disk = serializers.IntegerField(help_text="past the conversion's disk limit")
    governor = serializers.IntegerField(help_text="stopped by the worker's memory governor: its machine ran low")


class WorkerSerializer(serializers.Serializer):
    identity = serializers.CharField()
    service = serializers.CharField(source="service.name")
    dispatched = serializers.IntegerField()
    returned = serializers.IntegerField()
    in_flight = serializers.IntegerField(help_text="dispatched and not yet returned")
    first_seen = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()
    # From the worker's heartbeats, as it last reported them, counted since its process started.
    conversions = serializers.IntegerField(help_text="conversions it finished (0 for a worker with no heartbeat)")
    peak_rss_bytes = serializers.IntegerField(
        source="peak_rss", help_text="bytes: the largest resident size one of its conversions reached"
    )
    kills = serializers.SerializerMethodField(help_text="its conversions killed, by reason; every reason present")
    heartbeat_at = serializers.DateTimeField(
        allow_null=True, help_text="its latest heartbeat; null for a worker that sends none (an unmodified CorTeX one)"
    )

    @extend_schema_field(WorkerKillsSerializer)
    def get_kills(self, worker: Worker) -> dict[str, int]:
        return kills_by_reason(worker.kills)
