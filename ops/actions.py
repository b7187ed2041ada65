"""Writes of the ops app: the configuration overrides (PUT /api/config, the config screen, `manage.py config
set`), journaled with the values before and after, never the input (a refused value could be a secret)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F

from accounts.actions import journal_note, journaled
from accounts.choices import Action
from config.errors import BadRequest
from config.live import config_refresh
from config.overrides import KEYS, pair_problem, problem
from ops.configuration import NOT_SETTABLE, environment_value
from ops.models import ConfigOverride, ConfigVersion


@dataclass(frozen=True)
class ConfigChange:
    """A stored change (ConfigChangeSerializer): each key's value before and after, and the keys that need a
    restart; the API adds the configuration after it."""

    before: dict[str, Any]
    after: dict[str, Any]
    restart_required: list[str]
    configuration: dict[str, Any] | None = None


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BadRequest("the configuration change must be a JSON object", errors={prefix or "body": ["not an object"]})
    flat: dict[str, Any] = {}
    for name, value in data.items():
        dotted = f"{prefix}{name}"
        if isinstance(value, dict):  # nested keys merge: only the leaves given change
            flat.update(_flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value  # a list replaces the list before it
    return flat


def _check(name: str, value: Any) -> Any:
    key = KEYS.get(name)
    if key is None:
        why = NOT_SETTABLE.get(name, "is not a key")
        raise BadRequest(f"{name} {why}", errors={name: [why]})
    wrong = problem(key, value)
    if wrong is not None:
        # Only a number is echoed: a text put in the wrong field could be a secret.
        shown = f", not {value}" if isinstance(value, int | float) and not isinstance(value, bool) else ""
        raise BadRequest(f"{name} {wrong}{shown}", errors={name: [wrong]})
    return value


@journaled(Action.CONFIG_SET, target="config", secret_input=True)
def config_update(data: Any, *, actor: str) -> ConfigChange:
    """Validate a partial (nested) change whole, then store it; returns before, after and the keys that need a
    restart. A value of null removes the override. Nothing is stored when any key is refused."""
    flat = _flatten(data)
    if not flat:
        raise BadRequest("the configuration change is empty", errors={"body": ["no key given"]})
    checked = {name: _check(name, value) for name, value in flat.items()}
    with transaction.atomic():
        current = dict(ConfigOverride.objects.select_for_update().values_list("key", "value"))
        values = {name: current.get(name, environment_value(name)) for name in KEYS}
        before = {name: values[name] for name in checked}
        after = {name: environment_value(name) if value is None else value for name, value in checked.items()}
        clash = pair_problem(values | after)
        if clash is not None:
            name, why = clash
            raise BadRequest(f"{name} {why}", errors={name: [why]})
        for name, value in checked.items():
            if value is None:
                ConfigOverride.objects.filter(key=name).delete()
            else:
                ConfigOverride.objects.update_or_create(key=name, defaults={"value": value, "updated_by": actor[:100]})
        ConfigVersion.objects.get_or_create(pk=1)
        ConfigVersion.objects.filter(pk=1).update(version=F("version") + 1)
    restart = sorted(name for name in checked if not KEYS[name].live)
    journal_note(before=before, after=after)
    config_refresh(force=True)
    return ConfigChange(before=before, after=after, restart_required=restart)
