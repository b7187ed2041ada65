"""Every Redis URL form that `up` writes or an operator may set works for a direct client and for Celery's
broker, against a real Redis the test starts (TCP on a free port and a unix socket of its own)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kombu import Connection

from config import embedded
from config.redis_client import RedisUrlError, celery_url, redis_client, redis_py_url
from tests.support import free_port, wait_until


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, Path, Path]]:
    """A Redis of the test's own on a free TCP port and a unix socket in a temporary directory."""
    directory = Path(tempfile.mkdtemp(prefix="ccs-redis-"))  # short: socket paths are limited
    port = free_port()
    argv = embedded.redis_server_command(directory)
    argv[argv.index("--port") + 1] = str(port)
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    socket_path = embedded.redis_socket(directory)
    try:

        def answers() -> bool:
            try:
                return bool(redis.Redis(unix_socket_path=str(socket_path)).ping())
            except redis.RedisError:
                return False

        wait_until(answers, 10, 0.05, "the test's Redis")
        yield port, socket_path, directory
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


FORMS = ["redis", "unix", "redis+socket", "embedded"]


def _url(form: str, server: tuple[int, Path, Path], db: int) -> str:
    """The URL of `form` for database `db` of the test's server; `embedded` is what `up` writes (database 0)."""
    port, socket_path, directory = server
    return {
        "redis": f"redis://127.0.0.1:{port}/{db}",
        "unix": f"unix://{socket_path}?db={db}",
        "redis+socket": f"redis+socket://{socket_path}?virtual_host={db}",
        "embedded": embedded.redis_url(directory),
    }[form]


def _db(form: str, db: int) -> int:
    return 0 if form == "embedded" else db


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("asked", [0, 5])
def test_a_direct_client_reaches_the_database_the_url_names(server, form, asked):
    socket_path, db = server[1], _db(form, asked)
    url = _url(form, server, asked)
    key = f"ccs-test:{uuid.uuid4().hex}"
    redis_client(url, socket_connect_timeout=2).set(key, form)
    try:
        # Read back through a client built without any URL: the key is in that very database.
        assert redis.Redis(unix_socket_path=str(socket_path), db=db).get(key) == form.encode()
        assert redis.Redis(unix_socket_path=str(socket_path), db=(db + 1) % 16).get(key) is None
    finally:
        redis.Redis(unix_socket_path=str(socket_path), db=db).delete(key)


@pytest.mark.parametrize("form", FORMS)
def test_celery_s_broker_sends_through_every_form_to_the_database_the_url_names(server, form):
    socket_path, db = server[1], _db(form, 3)
    url = _url(form, server, 3)
    queue = f"ccs-test-{uuid.uuid4().hex}"
    with Connection(celery_url(url), connect_timeout=3) as connection:
        connection.ensure_connection(max_retries=1)
        with connection.SimpleQueue(queue) as simple:
            simple.put({"form": form})
            # kombu's Redis transport keeps a queue as a list named after it, in the URL's database.
            assert redis.Redis(unix_socket_path=str(socket_path), db=db).llen(queue) == 1
            message = simple.get(timeout=5)
            assert message.payload == {"form": form}
            message.ack()


def test_the_translations_keep_everything_but_the_scheme_and_the_database_parameter():
    assert redis_py_url("redis+socket:///run/r.sock?virtual_host=4") == "unix:///run/r.sock?db=4"
    assert redis_py_url("redis+socket:///run/r.sock") == "unix:///run/r.sock"
    assert celery_url("unix:///run/r.sock?db=4") == "redis+socket:///run/r.sock?virtual_host=4"
    for unchanged in ("redis://:pw@host:6380/2", "rediss://host:6380/0?ssl_cert_reqs=none"):
        assert redis_py_url(unchanged) == unchanged
        assert celery_url(unchanged) == unchanged
    assert redis_py_url("unix:///run/r.sock?db=1") == "unix:///run/r.sock?db=1"
    assert celery_url("redis+socket:///run/r.sock") == "redis+socket:///run/r.sock"


def test_a_tls_url_gets_a_tls_connection():
    client = redis_client("rediss://127.0.0.1:6380/0")
    assert client.connection_pool.connection_class.__name__ == "SSLConnection"


@pytest.mark.parametrize("url", ["x", "http://127.0.0.1:6379/0", "unix://", "redis+socket://"])
def test_a_url_of_no_known_form_is_refused_with_the_forms_it_may_take(url):
    with pytest.raises(RedisUrlError) as refused:
        redis_client(url)
    assert "redis://" in str(refused.value) or "path" in str(refused.value)
    with pytest.raises(RedisUrlError):
        celery_url(url)
