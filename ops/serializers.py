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
