"""Each configuration key declared once (config/keys.py): the settings, the run-time keys, the live configuration
and docs/configuration.md are derived from it; loading the settings opens no connection, and the stored values
are read as the apps become ready."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading

import psycopg
import pytest
from django.db import connection

import config.settings as settings_module
from config import keys
from config.env import ConfigError
from config.live import LIVE_SETTINGS, LiveConfig
from config.overrides import KEYS
from tests import support
from tests.support import PROJECT_DIR, child_env, free_port

DOC = PROJECT_DIR / "docs" / "configuration.md"
DOC_MAX_BYTES = 10_240


def test_the_committed_doc_is_the_one_the_declaration_gives():
    """Regenerate it with `python -m config.keys > docs/configuration.md`."""
    assert DOC.read_text() == keys.doc()
    assert DOC.stat().st_size <= DOC_MAX_BYTES
    generated = subprocess.run(
        [sys.executable, "-m", "config.keys"], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60
    )
    assert generated.returncode == 0, generated.stderr
    assert generated.stdout == DOC.read_text()


def test_the_doc_lists_every_key_with_its_default_and_run_time_name():
    text = DOC.read_text()
    for key in keys.DECLARED.values():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key.env}` |"))
        assert keys.shown_default(key) in row, key.env
        if key.name is not None and key.settable:
            assert f"`{key.name}`" in row and ("live" in row) is key.live, key.env


def test_every_declared_key_is_a_setting_with_the_declared_value():
    for key in keys.DECLARED.values():
        value = getattr(settings_module, key.setting)
        declared = settings_module.declared(key.setting)
        assert value == (declared.upper() if key.env == "LOG_LEVEL" else declared), key.env
    assert {name: settings_module.declared(k.setting) for name, k in KEYS.items()} == settings_module.CONFIG_ENVIRONMENT


def test_the_settings_read_no_variable_outside_the_declaration():
    """config/settings.py takes every environment value through `declared`."""
    source = (PROJECT_DIR / "config" / "settings.py").read_text()
    assert not re.search(r"\benv_(str|int|bool|list|choice|roots)\(|os\.environ|getenv", source)


def test_the_run_time_keys_and_the_live_configuration_come_from_the_declaration():
    settable = {key.name for key in keys.DECLARED.values() if key.name is not None and key.settable}
    assert set(KEYS) == settable and len(KEYS) >= 30
    assert {key.setting for key in KEYS.values() if key.live} == LIVE_SETTINGS
    assert [field.name for field in LiveConfig.__dataclass_fields__.values()] == [
        key.setting for key in KEYS.values() if key.live
    ]
    for key in KEYS.values():
        if key.live:
            assert LiveConfig.__dataclass_fields__[key.setting].type == key.kind


def test_every_live_value_a_module_reads_is_a_live_key():
    """`get_config()` is typed loosely (its class is built from the declaration): the names read from it are
    checked here instead."""
    read = set()
    for path in PROJECT_DIR.rglob("*.py"):
        relative = path.relative_to(PROJECT_DIR)
        if relative.parts[0] in {".venv", "var", "node_modules"}:
            continue
        text = path.read_text()
        read |= set(re.findall(r"get_config\(\)\.([A-Z_]+)", text))
        if "live = get_config()" in text:
            read |= set(re.findall(r"\blive\.([A-Z][A-Z_]+)\b", text))
    assert read and read <= LIVE_SETTINGS, read - LIVE_SETTINGS
    assert "DISPATCHER_LONGEST_FIRST" in read


def test_an_environment_value_outside_its_bounds_stops_start_up(monkeypatch):
    key = keys.DECLARED["DISPATCHER_SINK_PORT"]
    monkeypatch.setenv("DISPATCHER_SINK_PORT", "65536")
    with pytest.raises(ConfigError, match="DISPATCHER_SINK_PORT must be at most 65535, not 65536"):
        keys.value(key, {})
    monkeypatch.setenv("PAYLOAD_MAX_BYTES", str(4 * 1024**3))
    with pytest.raises(ConfigError, match="PAYLOAD_MAX_BYTES must be below 4 GiB"):
        keys.value(keys.DECLARED["PAYLOAD_MAX_BYTES"], {})
    monkeypatch.setenv("TRUSTED_PROXIES", "10.0.0.5,not-an-address")
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES holds 'not-an-address'"):
        keys.value(keys.DECLARED["TRUSTED_PROXIES"], {})


def test_a_derived_default_follows_the_values_before_it(monkeypatch, tmp_path):
    monkeypatch.delenv("CORPUS_ROOTS", raising=False)
    monkeypatch.setenv("PASSKEY_RP_ID", "ccs.example.org")
    monkeypatch.delenv("PASSKEY_ORIGINS", raising=False)
    assert keys.value(keys.DECLARED["CORPUS_ROOTS"], {"VAR_DIR": tmp_path}) == [(tmp_path / "corpora").resolve()]
    values = {"PASSKEY_RP_ID": "ccs.example.org"}
    assert keys.value(keys.DECLARED["PASSKEY_ORIGINS"], values) == ["http://ccs.example.org:8000"]
    monkeypatch.setenv("CORPUS_ROOTS", f"{tmp_path}/a:{tmp_path}/b")
    assert keys.value(keys.DECLARED["CORPUS_ROOTS"], {}) == [tmp_path / "a", tmp_path / "b"]


class _Listener:
    """A TCP port that counts the connections made to it (and answers none)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted = 0
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.accepted += 1
            self._open.append(conn)

    def close(self) -> None:
        for conn in self._open:
            conn.close()
        self.socket.close()


_LOAD = "import config.settings as s; print(s.DATABASE_URL)"
_SETUP = (
    "import django; django.setup(); from django.conf import settings; from config.live import get_config;"
    " print(settings.DISPATCHER_SINK_PORT, get_config().JOB_STALL_SECONDS)"
)


def _python(code: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**child_env(), "DATABASE_URL": database_url, "DISPATCHER_SINK_PORT": "40123", "JOB_STALL_SECONDS": "77"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=60
    )


def test_loading_the_settings_opens_no_connection():
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/ccs"
    loaded = _python(_LOAD, closed)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == closed
    set_up = _python(_SETUP, closed)  # nothing answers: the apps start on the environment's values
    assert set_up.returncode == 0, set_up.stderr
    assert set_up.stdout.split() == ["40123", "77"]

    listener = _Listener()
    try:
        url = f"postgresql://postgres@127.0.0.1:{listener.port}/ccs"
        assert _python(_LOAD, url).returncode == 0
        assert listener.accepted == 0  # the settings alone: no connection
        assert _python(_SETUP, url).returncode == 0
        assert listener.accepted >= 1  # the apps ready: the stored values are asked for (and none answer)
    finally:
        listener.close()


@pytest.mark.slow
def test_migrate_on_a_fresh_database_starts_without_the_overrides_table():
    """A process whose database has no table yet (before the first `migrate`) starts on the environment's
    values, and `migrate` makes the table the next process reads."""
    name = f"ccs_fresh_{free_port()}"
    here = f"/{connection.settings_dict['NAME']}"
    admin, url = (support.test_database_url().replace(here, f"/{other}", 1) for other in ("postgres", name))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {**child_env(), "DATABASE_URL": url}
        migrated = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input"],
            cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert migrated.returncode == 0, migrated.stderr
        with psycopg.connect(url) as conn:
            conn.execute("""INSERT INTO ops_configoverride (key, value, updated_at, updated_by)
                            VALUES ('dispatcher.sink_port', '40124', now(), 'test')""")
        shown = _python(_SETUP, url)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.split() == ["40124", "77"]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
