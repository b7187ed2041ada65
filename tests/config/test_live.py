"""The live configuration's one accessor (config.live.get_config): a change is seen through it, settings stay
as the process started, and no product module changes django.conf.settings or reads a live key from them.
(A running job worker, another process, following a change: tests/jobs/test_celery.py; a running dispatcher:
tests/ops/test_config.py.)"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from django.conf import settings

from config.live import LIVE_SETTINGS, LiveConfig, config_refresh, get_config
from config.overrides import KEYS
from ops.actions import config_update
from ops.models import ConfigOverride, ConfigVersion
from tests.support import PROJECT_DIR


def test_the_accessor_has_a_field_for_each_live_key_and_no_other():
    assert {key.setting for key in KEYS.values() if key.live} == LIVE_SETTINGS
    assert len(LIVE_SETTINGS) >= 10


@pytest.mark.django_db
def test_a_live_change_is_seen_through_the_accessor_while_settings_stay():
    environment = settings.CONFIG_ENVIRONMENT["jobs.stall_seconds"]
    before = get_config()
    assert before.JOB_STALL_SECONDS == environment == settings.JOB_STALL_SECONDS
    config_update({"jobs": {"stall_seconds": environment + 11}}, actor="tester")
    assert environment + 11 == get_config().JOB_STALL_SECONDS
    assert environment == settings.JOB_STALL_SECONDS  # settings never change while the process runs
    assert environment == before.JOB_STALL_SECONDS  # an object a reader holds does not change under it
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.JOB_STALL_SECONDS = 1  # type: ignore[misc]
    config_update({"jobs": {"stall_seconds": None}}, actor="tester")  # a reset: the environment's value again
    assert environment == get_config().JOB_STALL_SECONDS


@pytest.mark.django_db
def test_a_change_stored_by_another_process_is_seen_after_a_refresh():
    """What another process's PUT leaves in the tables: new overrides and a bumped version."""
    config_refresh(force=True)
    ConfigOverride.objects.create(key="reports.page_size_max", value=17, updated_by="elsewhere")
    ConfigOverride.objects.create(key="dispatcher.max_attempts", value=-1, updated_by="psql")  # past the checks
    ConfigVersion.objects.update_or_create(pk=1, defaults={"version": 99})
    assert get_config().MAX_REPORT_PAGE_SIZE == settings.MAX_REPORT_PAGE_SIZE  # not read yet
    assert config_refresh(force=True) is True
    assert get_config().MAX_REPORT_PAGE_SIZE == 17
    assert get_config().DISPATCHER_MAX_ATTEMPTS == settings.DISPATCHER_MAX_ATTEMPTS  # the bad value is left out
    assert config_refresh(force=True) is False  # the same version: nothing read again


@pytest.mark.django_db
def test_a_test_override_of_a_setting_reaches_the_accessor(settings):
    settings.MAX_REPORT_OFFSET = 5
    assert get_config().MAX_REPORT_OFFSET == 5


def test_live_config_is_frozen_and_typed():
    assert all(field.type in ("int", "bool") for field in dataclasses.fields(LiveConfig))
    assert LiveConfig.__dataclass_params__.frozen


# --- nothing changes django.conf.settings, and live keys are read through the accessor ---


def _product_modules() -> list[Path]:
    found = []
    for path in sorted(PROJECT_DIR.rglob("*.py")):
        relative = path.relative_to(PROJECT_DIR)
        if relative.parts[0] in {"tests", ".venv", "var", "node_modules"} or "migrations" in relative.parts:
            continue
        found.append(relative)
    return found


def _settings_writes(source: str) -> list[int]:
    """Lines that assign, augment or delete an attribute of `settings`, call setattr/delattr on it, or use
    override_settings/modify_settings."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [
                t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])
            ]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "settings"
            ):
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name, args = node.func.id, node.args
            if name in {"setattr", "delattr"} and args and isinstance(args[0], ast.Name) and args[0].id == "settings":
                lines.append(node.lineno)
            if name in {"override_settings", "modify_settings"}:
                lines.append(node.lineno)
    return lines


# The settings module, and the one function that completes it from the stored values as the apps become ready,
# before any request, task or connection (config.overrides.apply_stored, called by ops/apps.py).
_SETTINGS_WRITERS = {Path("config/settings.py"): None, Path("config/overrides.py"): "apply_stored"}


def test_no_product_module_changes_django_settings():
    offenders = [
        f"{relative}:{line}"
        for relative in _product_modules()
        if relative != Path("config/settings.py")
        for line in _settings_writes((PROJECT_DIR / relative).read_text())
        if not _in_function(relative, line)
    ]
    assert offenders == []
    assert len(_product_modules()) > 100
    writes = _settings_writes((PROJECT_DIR / "config" / "overrides.py").read_text())
    assert writes and all(_in_function(Path("config/overrides.py"), line) for line in writes)


def _in_function(relative: Path, line: int) -> bool:
    """Whether the line lies in the one function of the module allowed to write the settings."""
    allowed = _SETTINGS_WRITERS.get(relative)
    if allowed is None:
        return False
    for node in ast.walk(ast.parse((PROJECT_DIR / relative).read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == allowed:
            return node.lineno <= line <= (node.end_lineno or node.lineno)
    return False


def test_the_settings_scan_finds_the_writes_it_forbids():
    for spelled in [
        "settings.JOB_STALL_SECONDS = 5",
        "settings.RESULTS_DIR, settings.X = a, b",
        "settings.MAX_REPORT_OFFSET += 1",
        "setattr(settings, name, value)",
        "delattr(settings, 'X')",
        "with override_settings(DEBUG=True):\n    pass",
    ]:
        assert _settings_writes(spelled), spelled
    for fine in ["x = settings.JOB_STALL_SECONDS", "setattr(other, 'a', 1)", "config.X = 1"]:
        assert not _settings_writes(fine), fine


_LIVE_READ = re.compile(r"\bsettings\.(" + "|".join(sorted(LIVE_SETTINGS)) + r")\b")


def test_no_module_reads_a_live_key_from_the_settings():
    """Only the accessor reads a live key's setting (its default); everyone else asks get_config()."""
    offenders = [
        f"{relative}:{number}: {line.strip()}"
        for relative in _product_modules()
        if relative not in {Path("config/live.py"), Path("config/settings.py")}
        for number, line in enumerate((PROJECT_DIR / relative).read_text().splitlines(), 1)
        if _LIVE_READ.search(line)
    ]
    assert offenders == []
    assert _LIVE_READ.search("limit = settings.DISPATCHER_MAX_IN_FLIGHT")
