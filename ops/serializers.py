from __future__ import annotations

from rest_framework import serializers


class DatabaseReachSerializer(serializers.Serializer):
    reachable = serializers.BooleanField()


class LivenessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "unavailable"])
    database = DatabaseReachSerializer()
    conversion_sandbox = serializers.ChoiceField(
        choices=["bwrap", "none", "unavailable"],
        help_text="bwrap: conversions run sandboxed; unavailable: the sandbox cannot start, conversions are refused; "
        "none: the sandbox is turned off (CONVERSION_SANDBOX=none)",
    )


# --- detailed health ---
HEALTH_STATUSES = ["ok", "warning", "problem"]


class HealthCheckSerializer(serializers.Serializer):
    name = serializers.ChoiceField(
        choices=[
            "database_pool",
            "postgresql",
            "redis",
            "dispatcher",
            "workers",
            "corpus_roots",
            "results_dir",
            "export_root",
            "jobs",
            "expired_leases",
        ]
    )
    status = serializers.ChoiceField(choices=HEALTH_STATUSES)
    summary = serializers.CharField()
    remediation = serializers.CharField(allow_null=True, help_text="What to do about it; null when the check is ok")
    details = serializers.DictField(help_text="The check's figures (counts, paths, ports, free bytes, versions)")


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=HEALTH_STATUSES, help_text="The worst check's status")
    checked_at = serializers.DateTimeField()
    checks = HealthCheckSerializer(many=True)


# --- end detailed health ---
