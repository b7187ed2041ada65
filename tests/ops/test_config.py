"""GET/PUT /api/config, manage.py config and the /config screen: masking, deep merge, validation, persistence,
and a running dispatcher following a changed in-flight limit without a restart."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection

from accounts.models import AuditEntry
from config.live import get_config
from config.overrides import stored
from corpora.models import Task
from ops.models import ConfigOverride
from tests import support
from tests.corpora.helpers import activated, imported
from tests.dispatcher.conftest import dispatcher as dispatcher_fixture
from tests.dispatcher.harness import CLEAN_LOG, FakeWorker, dispatcher_rounds, result_zip, wait_for
from tests.support import PROJECT_DIR, child_env, free_port

dispatcher = dispatcher_fixture  # the real dispatcher's fixture, shared with tests/dispatcher

SECRET = "s3cret-Pa55word"


@pytest.fixture
def secret_database_url(settings) -> None:
    settings.DATABASE_URL = f"postgresql://ccs:{SECRET}@db.example:5432/ccs"


def _entries(body: dict) -> dict[str, dict]:
    return {entry["key"]: entry for entry in body["entries"]}


def _config(authed) -> dict[str, dict]:
    response = authed.get("/api/config")
    assert response.status_code == 200, response.content
    return _entries(response.json())


def _put(authed, body: dict):
    return authed.put("/api/config", data=json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_get_and_put_need_a_token(api):
    assert api.get("/api/config").status_code == 401
    assert _put(api, {"dispatcher": {"max_in_flight": 5}}).status_code == 401
    assert not ConfigOverride.objects.exists()


@pytest.mark.django_db
def test_the_configuration_lists_each_value_with_its_source(authed, monkeypatch):
    monkeypatch.setenv("DISPATCHER_LEASE_BATCH", "200")
    entries = _config(authed)
    for key in [
        "dispatcher.ventilator_port", "dispatcher.sink_port", "dispatcher.message_size", "dispatcher.max_in_flight",
        "dispatcher.lease_seconds", "dispatcher.max_attempts", "results.max_bytes", "reports.page_size_max",
        "reports.offset_max", "directories.corpus_roots", "directories.export_root", "directories.results_dir",
        "jobs.stall_seconds", "pool.max", "pool.timeout", "beat.job_sweep_seconds", "database.url", "tokens.count",
    ]:  # fmt: skip
        assert key in entries, key
    assert entries["dispatcher.lease_batch"]["source"] == "environment"
    assert entries["tokens.count"]["value"] == 1
    assert _put(authed, {"jobs": {"stall_seconds": 77}}).status_code == 200
    entry = _config(authed)["jobs.stall_seconds"]
    assert (entry["value"], entry["source"], entry["live"]) == (77, "api", True)
    assert get_config().JOB_STALL_SECONDS == 77  # live in this process at once, through the accessor
    assert django_settings.CONFIG_ENVIRONMENT["jobs.stall_seconds"] == django_settings.JOB_STALL_SECONDS


@pytest.mark.django_db
def test_no_secret_in_any_response_log_line_or_journal_entry(authed, token, screen_client, secret_database_url, caplog):
    caplog.set_level(logging.DEBUG)
    texts = [authed.get("/api/config").content.decode(), screen_client.get("/config").content.decode()]
    refused = _put(authed, {"database": {"url": f"postgresql://x:{SECRET}@h/db"}, "token": token})
    assert refused.status_code == 400
    texts.append(refused.content.decode())
    posted = screen_client.post(
        "/config", {"key": "database.url", "value": f"postgresql://x:{SECRET}@h/db"}, follow=True
    )
    assert "Nothing changed: database.url is set in the environment only" in posted.content.decode()
    texts.append(posted.content.decode())
    wrong_field = screen_client.post("/config", {"key": "pool.max", "value": SECRET}, follow=True)
    assert "Nothing changed: pool.max must be a whole number" in wrong_field.content.decode()
    texts.append(wrong_field.content.decode())
    texts.append(_put(authed, {"dispatcher": {"max_attempts": 4}}).content.decode())
    texts += [json.dumps(e.params) + e.target + e.outcome for e in AuditEntry.objects.all()]
    texts += [record.getMessage() for record in caplog.records]
    assert AuditEntry.objects.filter(action="config.set").count() == 4  # the refusals too, without their values
    assert "ccs:********@db.example" in texts[0]
    for text in texts:
        assert SECRET not in text and token not in text


@pytest.mark.django_db
def test_nested_keys_merge_and_lists_are_replaced(authed, tmp_path):
    one, two, three = (str(tmp_path / name) for name in ("one", "two", "three"))
    assert (
        _put(authed, {"dispatcher": {"max_in_flight": 7}, "directories": {"corpus_roots": [one, two]}}).status_code
        == 200
    )
    response = _put(authed, {"dispatcher": {"max_attempts": 5}, "directories": {"corpus_roots": [three]}})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["restart_required"] == ["directories.corpus_roots"]
    assert body["before"]["directories.corpus_roots"] == [one, two]
    entries = _config(authed)
    assert entries["dispatcher.max_in_flight"]["value"] == 7  # untouched sibling kept
    assert entries["dispatcher.max_attempts"]["value"] == 5
    assert entries["directories.corpus_roots"]["value"] == [three]  # the list replaced, not extended
    assert _put(authed, {"dispatcher": {"max_in_flight": None}}).status_code == 200  # null resets
    assert _config(authed)["dispatcher.max_in_flight"]["source"] in ("default", "environment")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"dispatcher": {"max_in_flight": "many"}}, "dispatcher.max_in_flight"),
        ({"dispatcher": {"max_in_flight": 0}}, "dispatcher.max_in_flight"),
        ({"dispatcher": {"nonsense": 1}}, "dispatcher.nonsense"),
        ({"directories": {"corpus_roots": "relative"}}, "directories.corpus_roots"),
        ({"pool": {"enabled": "yes"}}, "pool.enabled"),
        ({"pool": {"min": 9, "max": 4}}, "pool.min"),  # each fine alone, not together
        ({"beat": {"job_sweep_seconds": 1}}, "beat.job_sweep_seconds"),
        ({"database": {"url": "postgresql://x@h/db"}}, "database.url"),
        ({"tokens": {"count": 3}}, "tokens.count"),
        ({"conversion": {"timeout_seconds": 0}}, "conversion.timeout_seconds"),
        ({"conversion": {"timeout_seconds": 86401}}, "conversion.timeout_seconds"),
        ({"conversion": {"memory_mb": 63}}, "conversion.memory_mb"),
        ({"conversion": {"memory_mb": 2**40}}, "conversion.memory_mb"),
        ({"conversion": {"memory_mb": "4096"}}, "conversion.memory_mb"),
        ({"conversion": {"disk_mb": 15}}, "conversion.disk_mb"),
        ({"conversion": {"max_processes": 3}}, "conversion.max_processes"),
        ({"conversion": {"max_processes": 100_001}}, "conversion.max_processes"),
        ({"conversion": {"memory_floor_mb": -1}}, "conversion.memory_floor_mb"),
        ({"conversion": {"memory_floor_mb": 1.5}}, "conversion.memory_floor_mb"),
        ({"dispatcher": {"worker_silence_seconds": 4}}, "dispatcher.worker_silence_seconds"),
        ({"dispatcher": {"worker_silence_seconds": 86401}}, "dispatcher.worker_silence_seconds"),
    ],
)
def test_a_refused_change_names_the_field_and_changes_nothing(authed, body, field):
    before = _config(authed)
    response = _put(authed, {"jobs": {"stall_seconds": 99}, **body})  # a good key with a bad one
    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()
    assert _config(authed) == before
    assert not ConfigOverride.objects.exists()


CONVERSION_LIMITS = {
    "conversion.timeout_seconds": "CONVERSION_TIMEOUT_SECONDS",
    "conversion.memory_mb": "CONVERSION_MEMORY_MB",
    "conversion.disk_mb": "CONVERSION_DISK_MB",
    "conversion.max_processes": "CONVERSION_MAX_PROCESSES",
    "conversion.memory_floor_mb": "CONVERSION_MEMORY_FLOOR_MB",
}


@pytest.mark.django_db
def test_every_conversion_limit_and_the_worker_silence_are_listed_with_their_values(authed, capsys):
    entries = _config(authed)
    for name, setting in {
        **CONVERSION_LIMITS,
        "dispatcher.worker_silence_seconds": "DISPATCHER_WORKER_SILENCE_SECONDS",
    }.items():
        entry = entries[name]
        assert entry["value"] == entry["running"] == getattr(django_settings, setting), name
        assert entry["source"] in ("default", "environment") and entry["settable"] is True, name
        assert entry["live"] is (name == "dispatcher.worker_silence_seconds"), name  # workers read the limits at start
    assert entries["conversion.memory_floor_mb"]["value"] == django_settings.CONVERSION_MEMORY_FLOOR_MB
    call_command("config", "get", "conversion.memory_floor_mb")
    assert f"conversion.memory_floor_mb = {django_settings.CONVERSION_MEMORY_FLOOR_MB}  (" in capsys.readouterr().out


@pytest.mark.django_db
def test_the_conversion_limits_take_their_bounds_and_wait_for_a_restart_the_silence_is_live(authed):
    environment = django_settings.CONFIG_ENVIRONMENT
    lowest = {"timeout_seconds": 1, "memory_mb": 64, "disk_mb": 16, "max_processes": 4, "memory_floor_mb": 0}
    response = _put(authed, {"conversion": lowest, "dispatcher": {"worker_silence_seconds": 5}})
    assert response.status_code == 200, response.content
    assert response.json()["restart_required"] == sorted(CONVERSION_LIMITS)
    entries = _config(authed)
    for name, setting in CONVERSION_LIMITS.items():
        entry = entries[name]
        assert (entry["value"], entry["source"]) == (lowest[name.split(".")[1]], "api"), name
        assert entry["running"] == getattr(django_settings, setting) == environment[name], name  # until a restart
        assert entry["restart_pending"] is (entry["value"] != environment[name]), name
    assert get_config().DISPATCHER_WORKER_SILENCE_SECONDS == 5  # live in this process at once
    assert environment["dispatcher.worker_silence_seconds"] == django_settings.DISPATCHER_WORKER_SILENCE_SECONDS
    assert entries["dispatcher.worker_silence_seconds"]["restart_pending"] is False
    highest = {"timeout_seconds": 86400, "memory_mb": 1024 * 1024, "disk_mb": 1024 * 1024, "max_processes": 100_000,
               "memory_floor_mb": 1024 * 1024}  # fmt: skip
    assert _put(authed, {"conversion": highest, "dispatcher": {"worker_silence_seconds": 86400}}).status_code == 200
    assert _config(authed)["conversion.max_processes"]["value"] == 100_000


def test_no_key_takes_a_value_its_setting_would_refuse_from_the_environment(monkeypatch):
    """A stored value replaces the setting after the environment's was checked: each key's bounds are the ones
    the environment's value is read with (config/keys.py declares them once), so a value the API takes is one the
    environment could give, and one the API refuses the environment refuses too."""
    from config.env import ConfigError
    from config.keys import value
    from config.overrides import KEYS, problem

    checked = [key for key in KEYS.values() if key.kind == "int"]
    assert {key.setting for key in checked} >= set(CONVERSION_LIMITS.values()) | {"DISPATCHER_WORKER_SILENCE_SECONDS"}
    for key in checked:
        assert key.minimum is not None and key.maximum is not None and key.maximum > key.minimum, key.name
        for number in (key.minimum, key.maximum):
            monkeypatch.setenv(key.env, str(number))
            assert value(key, {}) == number, key.name
            assert problem(key, number) is None, key.name
        for number in (key.minimum - 1, key.maximum + 1):
            monkeypatch.setenv(key.env, str(number))
            with pytest.raises(ConfigError, match=key.env):
                value(key, {})
            assert problem(key, number) is not None, key.name


@pytest.mark.django_db
def test_keys_read_at_start_are_stored_and_shown_pending_until_a_restart(authed):
    environment = django_settings.CONFIG_ENVIRONMENT
    response = _put(authed, {"pool": {"max": 3, "timeout": 20}, "beat": {"job_sweep_seconds": 30}})
    assert response.status_code == 200, response.content
    assert response.json()["restart_required"] == ["beat.job_sweep_seconds", "pool.max", "pool.timeout"]
    entry = _config(authed)["pool.max"]
    assert (entry["value"], entry["source"], entry["live"]) == (3, "api", False)
    assert (entry["running"], entry["restart_pending"]) == (environment["pool.max"], True)
    assert environment["pool.max"] == django_settings.DB_POOL_MAX  # this process keeps its pool as it is
    assert _config(authed)["jobs.stall_seconds"]["restart_pending"] is False  # live keys never wait
    assert _put(authed, {"pool": {"max": None}}).status_code == 200  # back to what runs: nothing pending
    entry = _config(authed)["pool.max"]
    assert (entry["value"], entry["restart_pending"]) == (environment["pool.max"], False)


_SHOW_SETTINGS = """
import json
from django.conf import settings
from config.live import get_config
print(json.dumps({
    "pool": settings.DATABASES["default"]["OPTIONS"].get("pool"),
    "sweep": settings.CELERY_BEAT_SCHEDULE["jobs-sweep-interrupted"]["schedule"],
    "page_size_max": get_config().MAX_REPORT_PAGE_SIZE,
    "page_size_max_setting": settings.MAX_REPORT_PAGE_SIZE,
    "ventilator_port": settings.DISPATCHER_VENTILATOR_PORT,
    "export_root": str(settings.EXPORT_ROOT),
    "max_attempts": get_config().DISPATCHER_MAX_ATTEMPTS,
    "memory_floor_mb": settings.CONVERSION_MEMORY_FLOOR_MB,
}))
"""


@pytest.mark.django_db(transaction=True)  # the new process reads what this test stored
def test_a_new_process_starts_with_the_stored_values(authed, tmp_path):
    exports = tmp_path / "exports"
    change = {
        "pool": {"enabled": True, "min": 2, "max": 3, "timeout": 7},
        "beat": {"job_sweep_seconds": 30},
        "reports": {"page_size_max": 321},
        "dispatcher": {"ventilator_port": 40001},
        "directories": {"export_root": str(exports)},
        "conversion": {"memory_floor_mb": 512},
    }
    assert _put(authed, change).status_code == 200
    # Written by hand past the API's checks: the process says so and starts on the environment's value.
    ConfigOverride.objects.create(key="dispatcher.max_attempts", value=-1, updated_by="psql")
    shown = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _SHOW_SETTINGS],
        cwd=PROJECT_DIR, env=child_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.strip().splitlines()[-1]) == {
        "pool": {"min_size": 2, "max_size": 3, "timeout": 7},
        "sweep": 30.0,
        "page_size_max": 321,
        "page_size_max_setting": django_settings.CONFIG_ENVIRONMENT["reports.page_size_max"],
        "ventilator_port": 40001,
        "export_root": str(exports.resolve()),
        "max_attempts": django_settings.CONFIG_ENVIRONMENT["dispatcher.max_attempts"],
        "memory_floor_mb": 512,
    }
    assert "configuration: the stored value of dispatcher.max_attempts is ignored: it must be between" in shown.stderr


def test_a_process_starts_on_the_environment_when_the_database_has_no_stored_values():
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/ccs"
    assert stored(closed) == {}  # does not answer: the process's own use of it will say so
    name = connection.settings_dict["NAME"]
    no_table = support.test_database_url().replace(f"/{name}", "/postgres", 1)  # answers, never migrated
    assert stored(no_table) == {}


@pytest.mark.django_db
def test_manage_py_config_get_and_set_mirror_the_api(capsys):
    call_command("config", "set", "dispatcher.max_in_flight=9", "directories.export_root=/srv/exports")
    out = capsys.readouterr().out
    assert "dispatcher.max_in_flight = 9" in out and "restart needed for: directories.export_root" in out
    call_command("config", "get", "dispatcher.max_in_flight")
    assert "dispatcher.max_in_flight = 9  (api)" in capsys.readouterr().out
    call_command("config", "set", "pool.max=4")
    assert "restart needed for: pool.max" in capsys.readouterr().out
    call_command("config", "get", "pool.max")
    running = django_settings.DB_POOL_MAX
    assert f"pool.max = 4  (api; running {running} until a restart)" in capsys.readouterr().out
    entry = AuditEntry.objects.filter(action="config.set").last()  # the oldest: the first change
    assert entry.params["after"] == {"dispatcher.max_in_flight": 9, "directories.export_root": "/srv/exports"}
    with pytest.raises(Exception, match="must be between"):
        call_command("config", "set", "dispatcher.max_in_flight=-3")
    assert ConfigOverride.objects.get(key="dispatcher.max_in_flight").value == 9


@pytest.mark.django_db
def test_the_screen_is_the_twin_of_the_api(authed, screen_client, client):
    assert _put(authed, {"jobs": {"stall_seconds": 55}}).status_code == 200
    page = screen_client.get("/config").content.decode()
    for key in _config(authed):
        assert f'data-key="{key}"' in page
    assert '<tr data-key="jobs.stall_seconds">' in page and '<td class="source">api</td>' in page
    response = screen_client.post("/config", {"key": "pool.max", "value": "5"}, follow=True)
    page = response.content.decode()
    assert "pool.max = 5" in page and "Restart needed for: pool.max" in page
    assert _config(authed)["pool.max"]["restart_pending"] is True and "restart pending" in page
    entry = AuditEntry.objects.filter(action="config.set").first()
    assert (entry.actor, entry.params["after"]) == ("tester", {"pool.max": 5})
    response = screen_client.post("/config", {"key": "pool.max", "value": "lots"}, follow=True)
    assert "Nothing changed: pool.max must be a whole number" in response.content.decode()
    assert ConfigOverride.objects.get(key="pool.max").value == 5
    response = screen_client.post("/config", {"value": "5"}, follow=True)
    assert "Nothing changed: a key is required" in response.content.decode()
    client.logout()
    assert client.get("/config").status_code == 302
    assert client.post("/config", {"key": "pool.max", "value": "6"}).status_code == 302  # to the sign-in
    assert ConfigOverride.objects.get(key="pool.max").value == 5


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_running_dispatcher_follows_a_changed_in_flight_limit(corpus_root, dispatcher, authed):
    imported(corpus_root, "demo", documents=3)
    activated("demo")
    assert Task.objects.filter(corpus__name="demo", service__name="tex_to_html").count() == 3
    process = dispatcher()  # the environment's limit: 2000
    worker = FakeWorker(process)
    dispatcher_rounds(1)
    assert _put(authed, {"dispatcher": {"max_in_flight": 1}}).status_code == 200
    dispatcher_rounds(4)  # the dispatcher checks the configuration every 2 s, on its 1 s rounds
    first, _ = wait_for(lambda: worker.ask("tex_to_html"), message="a task")
    assert worker.ask("tex_to_html") is None  # one in flight, two TODO: the new limit holds
    worker.give("tex_to_html", first, result_zip(CLEAN_LOG))
    assert wait_for(lambda: worker.ask("tex_to_html"), message="room again")
    worker.close()


@pytest.mark.django_db
def test_a_change_made_directly_is_journaled_as_from_the_api_without_its_values():
    from config.errors import BadRequest
    from ops.actions import config_update

    config_update({"pool": {"max": 7}}, actor="shell")
    with pytest.raises(BadRequest):
        config_update({"pool": {"max": SECRET}}, actor="shell")
    rows = AuditEntry.objects.filter(action="config.set").order_by("id").values_list("actor", "target", "params")
    assert [(actor, target, params.get("after"), params.get("refused")) for actor, target, params in rows] == [
        ("shell", "config", {"pool.max": 7}, None),
        ("shell", "config", None, ["pool.max"]),
    ]
    assert SECRET not in str(list(rows))
