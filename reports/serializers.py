"""DTOs of the reports app."""

from __future__ import annotations

from rest_framework import serializers


class RunControlSerializer(serializers.Serializer):
    """The answer to pause or resume: which scope, and how many tasks were blocked or resumed."""

    corpus = serializers.CharField(allow_null=True)
    service = serializers.CharField(allow_null=True)
    action = serializers.ChoiceField(choices=["pause", "resume"])
    blocked = serializers.IntegerField(required=False)
    resumed = serializers.IntegerField(required=False)
