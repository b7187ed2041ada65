"""DTOs of the journal, of the sign-in form, of the screen sessions and of passkeys."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from accounts.models import AuditEntry, Passkey, ScreenSession
from config.api.fields import StrictCharField


class AuditEntrySerializer(serializers.ModelSerializer[AuditEntry]):
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


class AuditListParamsSerializer(serializers.Serializer[object]):
    """Filters of the journal; a limit above the maximum is reduced to it. An empty filter (the screen's
    form sends one) means no filter, as the OpenAPI document says (no minLength)."""

    actor = StrictCharField(required=False, allow_blank=True, max_length=100)
    action = StrictCharField(required=False, allow_blank=True, max_length=100)
    limit = serializers.IntegerField(required=False, default=settings.AUDIT_PAGE_DEFAULT, min_value=1)

    def validate_limit(self, value: int) -> int:
        return min(value, settings.AUDIT_PAGE_MAX)

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        return {key: value for key, value in attrs.items() if value != ""}


class TokenLoginSerializer(serializers.Serializer[object]):
    token = StrictCharField(max_length=200, trim_whitespace=True)


class ScreenSessionSerializer(serializers.ModelSerializer[ScreenSession]):
    """A signed-in screen session; its session key is never part of it."""

    expires_at = serializers.DateTimeField(read_only=True)

    class Meta:
        model = ScreenSession
        fields = ["id", "actor", "client_address", "started_at", "last_seen_at", "expires_at"]
        read_only_fields = fields


# --- passkeys ---
class PasskeySerializer(serializers.ModelSerializer[Passkey]):
    """A registered passkey as its owner sees it: never its credential id or key."""

    class Meta:
        model = Passkey
        fields = ["id", "actor", "name", "transports", "created_at", "last_used_at"]
        read_only_fields = fields


class PasskeyNameSerializer(serializers.Serializer[object]):
    """The name a user gives a passkey (at registration, and to rename it)."""

    name = StrictCharField(max_length=100, trim_whitespace=True)
