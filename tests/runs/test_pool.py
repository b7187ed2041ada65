"""GET /api/runs when the connection pool is exhausted, for real: a gunicorn web server as `up` starts
it, with a pool of one connection, and a first request that holds that connection while it waits on a
lock the test holds. The next request answers 503 within DB_POOL_TIMEOUT; nothing hangs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from ops.stack import web_child
from tests.corpora.helpers import activated, imported
from tests.support import PROJECT_DIR, child_env, free_port, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.tcp]

POOL_TIMEOUT = 1
MARGIN = 4  # seconds beyond the pool timeout that a loaded machine may add to the refusal


def get(url: str, *, timeout: float) -> tuple[int, str, dict | list | None]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            return response.status, response.headers["Content-Type"], json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], json.loads(exc.read())


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    """gunicorn (one process, threaded, as `up` runs it) on a free port against the test database, its
    pool one connection that waits at most POOL_TIMEOUT seconds; its base URL."""
    port = free_port()
    env = child_env(
        VAR_DIR=str(tmp_path), DB_POOL="true", DB_POOL_MIN="0", DB_POOL_MAX="1", DB_POOL_TIMEOUT=str(POOL_TIMEOUT)
    )
    log = (tmp_path / "gunicorn.log").open("ab")
    process = subprocess.Popen(
        web_child(host="127.0.0.1", port=port, processes=1).argv,
        cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert process.poll() is None, f"gunicorn exited (log {log.name})"
        try:
            return get(f"{base_url}/healthz", timeout=5)[0] == 200
        except OSError:
            return False

    try:
        wait_until(answers, timeout=60, message=f"gunicorn on {base_url} (log {log.name})")
        yield base_url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def _waiting_on_runs(watch: psycopg.Connection) -> bool:
    """A server session is blocked on a lock in a statement reading corpora_run."""
    row = watch.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND wait_event_type = 'Lock' AND query LIKE %s",
        ["%corpora_run%"],
    ).fetchone()
    return row[0] > 0


def test_runs_list_answers_503_when_the_pool_is_exhausted_and_200_once_it_is_free(corpus_root, web) -> None:
    from tests.support import test_database_url  # imported here: pytest would collect it as a test

    imported(corpus_root, "a", documents=1)
    activated("a")  # one open run, for the 200s to list
    database = test_database_url()
    # The executor is entered first so that it is left last: on a failure the lock goes before it waits.
    with (
        ThreadPoolExecutor(max_workers=1) as pool,
        psycopg.connect(database) as holder,
        psycopg.connect(database, autocommit=True) as watch,
    ):
        holder.execute("LOCK TABLE corpora_run IN ACCESS EXCLUSIVE MODE")  # until holder's transaction ends
        first = pool.submit(get, f"{web}/api/runs", timeout=60)
        # The first request holds the server's only connection, blocked inside its query.
        wait_until(lambda: _waiting_on_runs(watch), timeout=30, interval=0.05, message="the first request to block")

        started = time.monotonic()
        status, content_type, body = get(f"{web}/api/runs", timeout=POOL_TIMEOUT + MARGIN)
        elapsed = time.monotonic() - started
        assert status == 503, body
        assert content_type == "application/problem+json"
        assert body["type"] == "urn:ccs:problem:pool-exhausted" and body["status"] == 503, body
        assert POOL_TIMEOUT * 0.9 <= elapsed < POOL_TIMEOUT + MARGIN, elapsed  # it waited for the pool, then no more
        assert not first.done()

        holder.rollback()  # the lock goes: the first request reads and gives its connection back
        status, _, runs = first.result(timeout=30)
        assert status == 200 and [(r["corpus"], r["open"]) for r in runs] == [("a", True)]
    status, _, runs = get(f"{web}/api/runs", timeout=30)
    assert status == 200 and len(runs) == 1
