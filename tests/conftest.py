"""Shared fixtures. The tests talk to real PostgreSQL and Redis; if either cannot be reached the run
stops at once with a message saying which and where, instead of skipping."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

import tests.jobkinds  # noqa: F401  (registers the test-only job kinds)

_private_redis: subprocess.Popen | None = None
_private_redis_dir: Path | None = None


def _reach_postgres() -> None:
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    try:
        psycopg.connect(
            dbname="postgres", user=db["USER"], password=db["PASSWORD"] or None,
            host=db["HOST"] or None, port=db["PORT"] or None, connect_timeout=5,
        ).close()  # fmt: skip
    except psycopg.Error as exc:
        pytest.exit(
            f"Cannot reach PostgreSQL at {db['HOST']}:{db['PORT'] or 5432} ({exc}). "
            "Start it, or set DATABASE_URL to a server that answers.",
            returncode=3,
        )


def _reach_redis() -> None:
    """Without REDIS_URL the tests start a Redis of their own on a private socket: never the embedded
    one of the checkout (var/run/redis.sock), which a `make run` beside them uses and whose queue
    their purges would empty."""
    import redis
    from django.conf import settings

    from config import embedded
    from config.env import env_str
    from config.redis_client import celery_url, redis_client

    global _private_redis, _private_redis_dir
    if not env_str("REDIS_URL"):
        _private_redis_dir = Path(tempfile.mkdtemp(prefix="ccs-test-"))  # short: socket paths are limited
        _private_redis = subprocess.Popen(embedded.redis_server_command(_private_redis_dir), stdout=subprocess.DEVNULL)
        url = embedded.redis_url(_private_redis_dir)
        settings.REDIS_URL, settings.CELERY_BROKER_URL = url, celery_url(url)
        os.environ["REDIS_URL"] = url  # for the processes the tests start

        from config.celery import app

        app.conf.broker_url = celery_url(url)
    client = redis_client(socket_connect_timeout=3)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return
        except redis.RedisError as exc:
            if time.monotonic() > deadline:
                pytest.exit(
                    f"Cannot reach Redis at {settings.REDIS_URL} ({exc}). Start it, or set REDIS_URL.", returncode=3
                )
            time.sleep(0.1)


def pytest_configure(config: pytest.Config) -> None:
    _reach_postgres()
    _reach_redis()


@pytest.fixture(scope="session", autouse=True)
def _table_ownership_watched(django_db_setup, django_db_blocker) -> Iterator[None]:
    """Every write of the session is checked against the table's owner (tests/ownership.py); the session
    fails in pytest_sessionfinish when an app wrote another app's table."""
    from tests.ownership import WATCH

    WATCH.install()
    yield
    WATCH.uninstall()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from tests.ownership import WATCH

    if WATCH.violations:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.ownership import WATCH

    if WATCH.violations:
        terminalreporter.section("table ownership: an app wrote a table of another app", sep="=", red=True)
        for line in sorted({str(violation) for violation in WATCH.violations}):
            terminalreporter.line(line)


def pytest_unconfigure(config: pytest.Config | None) -> None:
    if _private_redis is not None:
        _private_redis.terminate()
        _private_redis.wait(10)
    if _private_redis_dir is not None:
        shutil.rmtree(_private_redis_dir, ignore_errors=True)


@pytest.fixture
def token(db: None) -> str:
    from accounts.actions import token_create

    _, raw = token_create(actor="tester", created_by="pytest")
    return raw


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def authed(api: APIClient, token: str) -> APIClient:
    api.credentials(HTTP_X_SERVICE_TOKEN=token)
    return api


@pytest.fixture
def screen_client(client, token: str):
    """A Django test client signed in to the screens with the tester's token."""
    response = client.post("/login", {"token": token})
    assert response.status_code == 302, response.content
    return client


@pytest.fixture
def purge_broker() -> Iterator[None]:
    """Drop messages left on the test broker's queue by earlier tests."""
    from config.celery import app

    app.control.purge()
    yield


@pytest.fixture(scope="session", autouse=True)
def _close_connection_pools(django_db_setup, django_db_blocker):
    """Connections left by the live server's request threads or by killed worker processes would keep
    the test database busy and stop its teardown: close the pools and end those sessions first."""
    yield
    from django.db import connection, connections

    for conn in connections.all():
        if conn.alias in getattr(conn, "_connection_pools", {}):  # reading conn.pool would open one
            conn.close_pool()
    if not connection.settings_dict["NAME"].startswith("test_"):
        return  # no test used the database: there is no test database to tidy
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def process_tmpdir() -> Iterator[Path]:
    """A TMPDIR for the processes a test starts (workers, web servers), removed with all they left in it: a
    process killed mid-conversion cannot remove its conversion's directory, which must not stay in the
    machine's /tmp. Passable by the sandbox user (nobody, when the tests run as root), as tmp_path is not:
    under a TMPDIR that user cannot reach, every conversion is staged in the machine's /tmp instead
    (conversion/sandbox.py), and a killed one stays there."""
    path = Path(tempfile.mkdtemp(prefix="ccs-test-tmpdir-"))
    try:
        path.chmod(0o711)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def corpus_root(tmp_path, settings):
    """A corpus root directory configured as the only one the service accepts."""
    root = (tmp_path / "corpora").resolve()
    root.mkdir()
    settings.CORPUS_ROOTS = [root]
    return root


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let every database test use the `progress` alias too (a test mirror of `default` through which
    jobs write their progress)."""
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is not None and "databases" not in marker.kwargs:
            item.add_marker(pytest.mark.django_db(*marker.args, databases="__all__", **marker.kwargs), append=False)


@pytest.fixture(autouse=True)
def _progress_on_the_test_connection():
    """In production jobs write progress through their own connection (the `progress` alias) so it
    shows while their work is in an open transaction. Inside a test's transaction a second
    connection would not see the job's row, so here the alias is the test's own connection."""
    from django.db import connections

    original = connections["progress"]
    connections["progress"] = connections["default"]
    yield
    connections["progress"] = original


@pytest.fixture(autouse=True)
def _config_overrides_forgotten() -> Iterator[None]:
    """Configuration overrides a test applied to this process's settings (PUT /api/config) end with it."""
    yield
    from config.live import config_forget

    config_forget()


@pytest.fixture(autouse=True)
def _protected_services(request: pytest.FixtureRequest) -> None:
    """Transactional tests flush every table, migration-made rows included; put init and import back
    for the tests that follow, as the migration would have left them."""
    if request.node.get_closest_marker("django_db") is None:
        return
    request.getfixturevalue("_django_db_helper")
    from services.actions import protected_service

    protected_service("init")
    protected_service("import")


@pytest.fixture(autouse=True, scope="session")
def own_convert_slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """In-process /convert calls take their slots in directories of this run and look for the warm engine at a
    socket of this run, not in VAR_DIR/run, which a `make run` of the same checkout shares: its conversions
    must not make a test's request busy, nor its engine serve a test's request."""
    from django.conf import settings

    import services.convert_slots

    directory = tmp_path_factory.mktemp("convert-slots")
    warm_directory = tmp_path_factory.mktemp("convert-warm-slots")
    # Short: a Unix socket's path is limited to 107 bytes.
    engine_directory = Path(tempfile.mkdtemp(prefix="ccs-engine-", dir="/tmp"))
    socket_before = settings.CONVERT_ENGINE_SOCKET
    settings.CONVERT_ENGINE_SOCKET = engine_directory / "engine.sock"
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(services.convert_slots, "convert_slots_dir", lambda: directory)
            patch.setattr(services.convert_slots, "warm_slots_dir", lambda: warm_directory)
            yield
    finally:
        settings.CONVERT_ENGINE_SOCKET = socket_before
        shutil.rmtree(engine_directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def _auth_failures_of_its_own(settings) -> Iterator[str]:
    """Each test counts failed authentications under keys of its own (tests send wrong tokens from the
    same address, and a count left by one would lock out the next); the keys are removed after it."""
    import uuid

    prefix = f"ccs-test:{uuid.uuid4().hex}:auth-failures:"
    settings.AUTH_FAILURE_KEY_PREFIX = prefix
    url = settings.REDIS_URL  # a test may point REDIS_URL elsewhere; its keys are here
    yield prefix
    from accounts.lockout import redis_for

    client = redis_for(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
