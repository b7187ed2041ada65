"""Serializer fields of the request side: a string field takes a string and nothing else."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """DRF's CharField turns 123 or 1.5 into "123" and "1.5"; the OpenAPI document says string, so a
    JSON number (or anything but a string) is refused. Form and query values are strings anyway."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
