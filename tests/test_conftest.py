"""The test session's own resources: without REDIS_URL the tests must not use (or purge) the embedded
Redis of the checkout that a `make run` beside them is using."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from config import embedded
from tests.support import PROJECT_DIR, wait_until

pytestmark = pytest.mark.slow

# What tests/conftest.py does at the start and the end of a session, then what a test's purge does.
_SESSION = """
import django
django.setup()
from django.conf import settings
import tests.conftest as conftest
conftest._reach_redis()
from config.celery import app
app.control.purge()
print(settings.REDIS_URL, app.conf.broker_url)
conftest.pytest_unconfigure(None)
"""


def test_without_redis_url_the_tests_use_a_redis_of_their_own_and_leave_make_runs_queue_alone(tmp_path):
    var_dir = tmp_path / "var"
    make_run = subprocess.Popen(embedded.redis_server_command(var_dir))  # the Redis a `make run` started
    try:
        client = redis.Redis(unix_socket_path=str(embedded.redis_socket(var_dir)), socket_connect_timeout=3)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        wait_until(answers, timeout=20, message="the make-run Redis")
        client.lpush("celery", b"a job queued by make run")
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        env.update(VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="config.settings")
        session = subprocess.run(
            [sys.executable, "-c", _SESSION], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=60
        )
        assert session.returncode == 0, session.stderr
        used, broker = session.stdout.splitlines()[-1].split()
        assert used == broker != embedded.redis_url(var_dir)
        assert client.lrange("celery", 0, -1) == [b"a job queued by make run"]
    finally:
        make_run.terminate()
        make_run.wait(10)
