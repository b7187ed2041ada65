"""Serializer fields of the request side: a string field takes a string and nothing else."""

from __future__ import annotations

from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from config.names import NAME_RULE, name_is_valid


class StrictCharField(serializers.CharField):
    """DRF's CharField turns 123 or 1.5 into "123" and "1.5"; the OpenAPI document says string, so a
    JSON number (or anything but a string) is refused. Form and query values are strings anyway."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """In a JSON body an integer is a JSON integer: DRF's IntegerField also takes "5" and 5.0. Form and
    query values are text by nature (the screens' forms share these serializers), so they are parsed."""

    def to_internal_value(self, data: Any) -> int:
        from_text = isinstance(getattr(self.root, "initial_data", None), QueryDict)
        if not from_text and (isinstance(data, bool) or not isinstance(data, int)):
            self.fail("invalid")
        return super().to_internal_value(data)


def validate_plain_name(value: str) -> None:
    """The validator of a field that names a corpus or a service (config.names)."""
    if not name_is_valid(value):
        raise serializers.ValidationError(f"Not a valid name: {NAME_RULE}.")


class StrictBooleanField(serializers.BooleanField):
    """In a JSON body a boolean is true or false: DRF's BooleanField also takes "yes", 1 and "on". A form's
    text (a checkbox's "on") is parsed as DRF does."""

    def to_internal_value(self, data: Any) -> bool:
        from_text = isinstance(getattr(self.root, "initial_data", None), QueryDict)
        if not from_text and not isinstance(data, bool):
            self.fail("invalid", input=data)
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """A choice among strings that refuses anything but a string in the words of StrictCharField."""

    default_error_messages = {**serializers.ChoiceField.default_error_messages, "not_a_string": "Not a valid string."}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)
