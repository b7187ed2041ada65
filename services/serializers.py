"""Service DTOs and the request bodies of the services endpoints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    validate_plain_name,
)
from config.names import NAME_MAX
from conversion import profiles
from services.models import Service, Worker
from services.queries import effective_lease_seconds, kills_by_reason, service_get


class ProfileSerializer(serializers.Serializer[object]):
    """A converter profile (conversion.profiles). As a request, every option is optional: those given
    replace the `preset`'s (the default preset's without one); an option the profile does not have is
    refused. Paths lie inside PROFILE_ROOTS (links resolved)."""

    preset = StrictChoiceField(
        choices=list(profiles.PRESETS), required=False, write_only=True,
        help_text="the preset the other options are given over (default: the default preset)",
    )  # fmt: skip
    engine = StrictCharField(
        required=False, max_length=profiles.PATH_MAX_CHARS,
        help_text="latexmlc, or another engine with latexmlc's command line: a name looked up on the worker's"
        " PATH, or an absolute path inside the profile roots",
    )  # fmt: skip
    preloads = serializers.ListField(
        child=StrictCharField(max_length=1000), required=False, max_length=profiles.PRELOADS_MAX,
        help_text="bindings to preload, each `name` or `[option,key=value,...]name` (latexml.sty: the options it"
        " declares)",
    )  # fmt: skip
    includestyles = StrictBooleanField(required=False, help_text="--includestyles: load raw .sty files")
    pmml = StrictBooleanField(required=False, help_text="--pmml: presentation MathML")
    cmml = StrictBooleanField(required=False, help_text="--cmml: content MathML")
    mathtex = StrictBooleanField(required=False, help_text="--mathtex: the TeX of each formula beside it")
    noinvisibletimes = StrictBooleanField(
        required=False, help_text="--noinvisibletimes (LaTeXML 0.8.7 refuses it; newer engines take it)"
    )
    nodefaultresources = StrictBooleanField(
        required=False, help_text="--nodefaultresources: no LaTeXML CSS or JavaScript with the HTML"
    )
    css = serializers.ListField(
        child=StrictCharField(max_length=profiles.URL_MAX_CHARS), required=False, max_length=profiles.PATHS_MAX,
        help_text="--css: stylesheets, each an https URL or a path inside the profile roots",
    )  # fmt: skip
    paths = serializers.ListField(
        child=StrictCharField(max_length=profiles.PATH_MAX_CHARS), required=False, max_length=profiles.PATHS_MAX,
        help_text="--path: directories of bindings, inside the profile roots",
    )  # fmt: skip
    timeout_seconds = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=profiles.TIMEOUT_MAX_SECONDS,
        help_text="seconds one conversion may run; null: the worker's --timeout, which caps it anyway",
    )  # fmt: skip
    memory_mb = StrictIntegerField(
        required=False, allow_null=True, min_value=profiles.MEMORY_MIN_MB, max_value=profiles.MEMORY_MAX_MB,
        help_text="the memory of one conversion; null: the worker's --memory-mb, which caps it anyway",
    )  # fmt: skip

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, Mapping):
            unknown = [key for key in data if key not in self.fields]
            if unknown:
                raise serializers.ValidationError(
                    {str(key)[:100]: [f"not an option of a profile; the options: {', '.join(profiles.OPTIONS)}"]
                     for key in unknown}
                )  # fmt: skip
        validated: dict[str, Any] = super().to_internal_value(data)
        return validated

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The same checks as the worker's (conversion.profiles), against the server's roots.
        try:
            profiles.profile_parse(dict(attrs), roots=settings.PROFILE_ROOTS)
        except profiles.ProfileInvalid as exc:
            raise serializers.ValidationError(exc.errors) from None
        return attrs


@extend_schema_field(
    {
        "oneOf": [{"type": "string", "enum": list(profiles.PRESETS)}, {"$ref": "#/components/schemas/ProfileRequest"}],
        "description": "a preset's name, or an object of options (ProfileRequest); absent: the default preset",
    }
)
class ProfileField(serializers.Field[str | dict[str, Any], str | dict[str, Any], object, object]):
    """A profile in a request body: a preset's name, or an object of options (ProfileSerializer)."""

    def to_internal_value(self, data: Any) -> str | dict[str, Any]:
        if isinstance(data, str):
            if data not in profiles.PRESETS:
                raise serializers.ValidationError(
                    f"no preset is named {data[:100]!r}; the presets: {', '.join(profiles.PRESETS)}"
                )
            return data
        if isinstance(data, Mapping):
            nested = ProfileSerializer(data=data)
            if not nested.is_valid():
                raise serializers.ValidationError(nested.errors)
            return dict(nested.validated_data)
        raise serializers.ValidationError("a preset's name or an object of options")

    def to_representation(self, value: Any) -> Any:
        return value


class PresetSerializer(serializers.Serializer[object]):
    name = serializers.CharField()
    description = serializers.CharField()
    profile = ProfileSerializer()
    profile_hash = serializers.CharField(help_text="sha256 of the profile's canonical JSON")


def preset_records() -> list[dict[str, Any]]:
    """GET /api/profiles: the presets, as PresetSerializer takes them."""
    return [
        {"name": preset.name, "description": preset.description, "profile": preset.profile.as_json(),
         "profile_hash": preset.profile.digest}
        for preset in profiles.PRESETS.values()
    ]  # fmt: skip


class ServiceSerializer(serializers.ModelSerializer[Service]):
    protected = serializers.BooleanField(source="is_protected")
    effective_lease_seconds = serializers.SerializerMethodField()
    corpora = serializers.IntegerField(source="corpus_count", help_text="corpora it is activated on")
    profile = ProfileSerializer(help_text="how its papers are converted: engine, options, timeout and memory")
    profile_hash = serializers.SerializerMethodField(help_text="sha256 of the profile's canonical JSON")
    profile_preset = serializers.SerializerMethodField(help_text="the preset the profile equals, or null")
    url = serializers.SerializerMethodField()

    class Meta:
        model = Service
        fields = [
            "name", "version", "inputformat", "outputformat", "command", "description", "lease_seconds",
            "effective_lease_seconds", "protected", "corpora", "profile", "profile_hash", "profile_preset",
            "created_at", "url",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.IntegerField())
    def get_effective_lease_seconds(self, service: Service) -> int:
        return effective_lease_seconds(service)

    def get_profile_hash(self, service: Service) -> str:
        return profiles.profile_load(service.profile).digest

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_profile_preset(self, service: Service) -> str | None:
        return profiles.preset_of(profiles.profile_load(service.profile))

    def get_url(self, service: Service) -> str:
        return f"/api/services/{service.name}"


class ServiceRegisterRequestSerializer(serializers.Serializer[object]):
    name = StrictCharField(max_length=NAME_MAX, validators=[validate_plain_name], trim_whitespace=False)
    version = StrictCharField(max_length=50, required=False)
    inputformat = serializers.ChoiceField(choices=["tex"], required=False)
    outputformat = serializers.ChoiceField(choices=["html"], required=False)
    command = StrictCharField(max_length=500, required=False, allow_blank=True)
    description = StrictCharField(max_length=2000, required=False, allow_blank=True)
    lease_seconds = StrictIntegerField(min_value=1, max_value=2_000_000_000, required=False, allow_null=True)
    profile = ProfileField(required=False)


class LeaseUpdateRequestSerializer(serializers.Serializer[object]):
    seconds = serializers.IntegerField(
        min_value=1, max_value=2_000_000_000, allow_null=True, help_text="positive seconds, or null to clear"
    )

    def to_internal_value(self, data: object) -> dict[str, int | None]:
        # "5" or 5.0 are not whole seconds given as a number: the body must carry a JSON integer or null.
        value = data.get("seconds") if isinstance(data, dict) else None
        if isinstance(value, bool) or (value is not None and not isinstance(value, int)):
            raise serializers.ValidationError({"seconds": ["must be a positive whole number, or null"]})
        validated: dict[str, int | None] = super().to_internal_value(data)
        return validated


def lease_request(service: str, data: Any) -> LeaseUpdateRequestSerializer:
    """The lease input of a service that exists: an unknown service is the first thing to say (404 before
    400), on the screen as on the API."""
    service_get(service)
    return LeaseUpdateRequestSerializer(data=data)


class WorkerKillsSerializer(serializers.Serializer[object]):
    """A worker's killed conversions by reason (conversion.choices.KillReason), every reason present."""

    timeout = serializers.IntegerField(help_text="past the conversion timeout")
    memory = serializers.IntegerField(help_text="past the conversion's memory limit")
    processes = serializers.IntegerField(help_text="past the conversion's process limit")
    disk = serializers.IntegerField(help_text="past the conversion's disk limit")
    governor = serializers.IntegerField(help_text="stopped by the worker's memory governor: its machine ran low")
    host_oom = serializers.IntegerField(help_text="ended by the kernel's OOM killer for the host's memory, not its own")


class InFlightSerializer(serializers.Serializer[object]):
    """A conversion in flight (services.queries.in_flight_record), as the dispatcher last heard of it."""

    task = serializers.IntegerField()
    corpus = serializers.CharField()
    document = serializers.CharField()
    worker = serializers.CharField(help_text="the worker thread converting it (a worker's identity)")
    since = serializers.DateTimeField(help_text="when the worker took it")
    heartbeat_at = serializers.DateTimeField(help_text="the worker's last heartbeat")
    elapsed_seconds = serializers.FloatField()
    timeout_seconds = serializers.FloatField(allow_null=True, help_text="its conversion's timeout; null until known")
    timeout_share = serializers.FloatField(allow_null=True, help_text="elapsed / timeout")
    p99_ms = serializers.IntegerField(allow_null=True, help_text="its service's 99th percentile runtime")
    past_p99 = serializers.BooleanField(help_text="it has run longer than that: it may be stuck")


class ServiceInFlightSerializer(InFlightSerializer):
    service = serializers.CharField()


class WorkerSerializer(serializers.Serializer[object]):
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
    engine = serializers.CharField(
        allow_null=True, help_text="the engine of the service's profile, as of its latest heartbeat"
    )
    engine_version = serializers.CharField(
        allow_null=True, help_text="what that engine said its version is on this worker (`ENGINE --VERSION`)"
    )
    converting = InFlightSerializer(
        many=True, help_text="its conversions in flight of this service, from the heartbeats (none without them)"
    )

    @extend_schema_field(WorkerKillsSerializer)
    def get_kills(self, worker: Worker) -> dict[str, int]:
        return kills_by_reason(worker.kills)
