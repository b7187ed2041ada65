"""DTOs of the journal and of the sign-in form."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from accounts.models import AuditEntry


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "actor",
            "action",
            "target",
            "params",
            "outcome",
            "status_code",
            "request_id",
            "created_at",
        ]
        read_only_fields = fields


class AuditListParamsSerializer(serializers.Serializer):
    """Filters of the journal; a limit above the maximum is reduced to it."""

    actor = serializers.CharField(required=False, max_length=100)
    action = serializers.CharField(required=False, max_length=100)
    limit = serializers.IntegerField(required=False, default=settings.AUDIT_PAGE_DEFAULT, min_value=1)

    def validate_limit(self, value: int) -> int:
        return min(value, settings.AUDIT_PAGE_MAX)


class TokenLoginSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200, trim_whitespace=True)
