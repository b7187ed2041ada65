from __future__ import annotations

from rest_framework import serializers


class DatabaseReachSerializer(serializers.Serializer):
    reachable = serializers.BooleanField()


class LivenessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "unavailable"])
    database = DatabaseReachSerializer()
