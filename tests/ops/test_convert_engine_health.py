"""The warm engine of POST /convert in GET /api/health, its screen and GET /metrics: a real WarmEngine (sandboxed
LaTeXML servers) answering on the socket of the test's own VAR_DIR, each pool named with its figures; a warning
while a pool starts or cannot start, or when no engine answers."""

from __future__ import annotations

import contextlib
import html
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conversion import warm
from conversion.engine import Limits
from conversion.sandbox import Sandbox
from ops.health import CONVERT_ENGINE_TIMEOUT_SECONDS
from services.queries import conversion_sandbox, convert_engine_socket, convert_engine_status
from tests.dispatcher.harness import wait_for
from tests.support import metrics_scrape

pytestmark = [pytest.mark.django_db]

MATH = warm.Profile("html5", "math", "math", pmml=True)
LIMITS = Limits(timeout=30, memory_mb=1024, disk_mb=64, max_processes=16)
START_SECONDS = 120  # warm.START_SECONDS: a loaded machine may take long to load LaTeXML


@pytest.fixture
def own_var_dir(settings) -> Iterator[Path]:
    """A VAR_DIR of the test's own (short: a Unix socket's path is limited), so that no engine of a `make run`
    beside the tests answers in its place."""
    path = Path(tempfile.mkdtemp(prefix="ccs-var-"))
    settings.VAR_DIR = path
    settings.CONVERT_WARM = True
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def engine_serving(own_var_dir) -> Iterator[Callable[..., warm.WarmEngine]]:
    """Start a WarmEngine of one pool of MATH, one server, answering on the test's socket; its socket server is
    shut down and the engine stopped (its servers killed) afterwards."""
    with contextlib.ExitStack() as stack:

        def start(sandbox: Sandbox | None = None) -> warm.WarmEngine:
            engine = warm.WarmEngine({MATH: 1}, limits=LIMITS, sandbox=sandbox or conversion_sandbox())
            stack.callback(engine.stop)
            server = stack.enter_context(warm.serving(engine, convert_engine_socket()))
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
            thread.start()
            stack.callback(thread.join, 10)
            stack.callback(server.shutdown)
            engine.start()
            return engine

        yield start


def _check(authed) -> dict:
    response = authed.get("/api/health")
    assert response.status_code == 200, response.content
    return next(check for check in response.json()["checks"] if check["name"] == "convert_engine")


def _pool_ready() -> bool:
    pools = convert_engine_status(timeout=5) or []
    return any(pool["profile"] == MATH.name and pool["ready"] == 1 and not pool["starting"] for pool in pools)


def _screen_pools(screen_client) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the pools table in the health screen's convert_engine row."""
    body = screen_client.get("/health").content.decode()
    row = re.search(r'<tr data-check="convert_engine">(.*?)</table>', body, re.S)
    assert row, "no convert_engine row with a table of pools"
    assert 'data-detail="pools"' in row.group(1)
    header = re.findall(r"<th>(.*?)</th>", row.group(1))
    (records,) = re.findall(r"<tbody>(.*?)</tbody>", row.group(1), re.S)
    rows = [re.findall(r"<td>(.*?)</td>", record, re.S) for record in re.findall(r"<tr>(.*?)</tr>", records, re.S)]
    return header, [[html.unescape(cell) for cell in cells] for cells in rows]


@pytest.mark.slow
def test_the_check_warns_while_the_pool_starts_and_is_ok_with_its_figures_once_its_server_is_ready(
    authed, engine_serving, screen_client
):
    engine_serving()
    seen = []

    def ok() -> bool:
        check = _check(authed)
        seen.append(check)
        return check["status"] == "ok"

    wait_for(ok, timeout=START_SECONDS, interval=0.05, message=lambda: f"the pool to be ready: {seen[-1]}")
    assert len(seen) > 1  # LaTeXML takes a second or more to load: the first check finds it starting
    for check in seen[:-1]:  # a starting server is not counted ready, and the check says it starts
        (pool,) = check["details"]["pools"]
        assert check["status"] == "warning" and pool["ready"] == 0, check
        assert f"{MATH.name}: 0 of 1 server(s) ready" in check["summary"], check
        assert "convert-engine" in check["remediation"]
    check = seen[-1]
    assert check["summary"] == f"every warm server ready: {MATH.name} 1/1"
    assert check["remediation"] is None
    assert check["details"]["answering"] is True
    assert check["details"]["pools"] == [{
        "profile": MATH.name, "servers": 1, "ready": 1, "busy": 0, "starting": 0, "served": 0, "failed": 0,
        "restarts": 0, "p50_ms": None, "p95_ms": None, "last_error": None,
    }]  # fmt: skip

    header, rows = _screen_pools(screen_client)
    assert header == [key.replace("_", " ") for key in check["details"]["pools"][0]]  # keys as words
    assert rows == [["—" if value is None else str(value) for value in check["details"]["pools"][0].values()]]


@pytest.mark.slow
def test_after_one_warm_conversion_health_and_metrics_count_it_for_its_pool(api, authed, token, engine_serving):
    engine = engine_serving()
    wait_for(_pool_ready, timeout=START_SECONDS, interval=0.1, message="the warm pool to be ready")
    before = metrics_scrape(api, token)
    labels = (("profile", MATH.name),)
    assert before["ccs_convert_warm_up"][()] == 1
    assert before["ccs_convert_warm_served_total"][labels] == 0

    answer = engine.convert(MATH, "x^2", timeout=30, wait=10)
    assert answer["status"] == "no_problem" and "<msup>" in answer["result"], answer

    samples = metrics_scrape(api, token)
    figures = {name: samples[f"ccs_convert_warm_{name}"][labels] for name in ("servers", "ready", "busy")}
    figures |= {name: samples[f"ccs_convert_warm_{name}_total"][labels] for name in ("served", "failed", "restarts")}
    assert figures == {"servers": 1, "ready": 1, "busy": 0, "served": 1, "failed": 0, "restarts": 0}
    assert samples["ccs_convert_warm_up"][()] == 1

    (pool,) = _check(authed)["details"]["pools"]
    assert (pool["served"], pool["failed"]) == (1, 0)
    assert pool["p50_ms"] > 0 and pool["p95_ms"] >= pool["p50_ms"]


@pytest.mark.slow
def test_a_pool_whose_server_cannot_start_is_a_warning_naming_its_last_error(
    api, authed, token, engine_serving, own_var_dir
):
    missing = own_var_dir / "no-bwrap"  # no such executable: every start of the server fails
    engine_serving(Sandbox(mode="bwrap", bwrap=str(missing)))

    def failed() -> dict | None:
        check = _check(authed)
        return check if check["details"]["pools"][0]["last_error"] else None

    check = wait_for(failed, timeout=60, interval=0.1, message="the pool's failed start")
    assert check["status"] == "warning"
    (pool,) = check["details"]["pools"]
    assert (pool["servers"], pool["ready"], pool["starting"]) == (1, 0, 1)
    assert str(missing) in pool["last_error"]
    assert check["summary"].startswith(f"warm pool(s) not fully ready: {MATH.name}: 0 of 1 server(s) ready")
    assert f"last error: {pool['last_error']}" in check["summary"]
    assert "conversion_sandbox" in check["remediation"]

    samples = metrics_scrape(api, token)
    labels = (("profile", MATH.name),)
    assert samples["ccs_convert_warm_up"][()] == 1  # the engine answers; its pool has no server
    assert (samples["ccs_convert_warm_servers"][labels], samples["ccs_convert_warm_ready"][labels]) == (1, 0)


def test_no_engine_answering_is_a_warning_that_says_how_to_start_it(api, authed, token, own_var_dir):
    check = _check(authed)
    assert check["status"] == "warning"
    assert check["summary"].startswith(f"the warm engine does not answer on {convert_engine_socket()}")
    assert "cold latexmlc" in check["summary"]
    assert "manage.py up" in check["remediation"] and "manage.py convert_engine" in check["remediation"]
    assert check["details"] == {"warm": True, "answering": False, "pools": []}

    samples = metrics_scrape(api, token)
    assert samples["ccs_convert_warm_up"][()] == 0
    assert "ccs_convert_warm_ready" not in samples and "ccs_convert_warm_served_total" not in samples


def test_an_engine_that_accepts_and_never_answers_is_a_warning_within_the_timeout(api, authed, token, own_var_dir):
    path = convert_engine_socket()
    path.parent.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(path))
        silent.listen(8)  # connections wait in the backlog, never read
        started = time.monotonic()
        check = _check(authed)
        assert check["status"] == "warning" and check["details"]["answering"] is False
        assert metrics_scrape(api, token)["ccs_convert_warm_up"][()] == 0
        # Two reads of the engine, each bounded by the timeout (not hung), with room for a loaded machine.
        assert time.monotonic() - started < 2 * CONVERT_ENGINE_TIMEOUT_SECONDS + 20


def test_with_the_warm_engine_off_the_check_is_ok_and_says_convert_runs_cold(api, authed, token, settings):
    settings.CONVERT_WARM = False
    check = _check(authed)
    assert check["status"] == "ok" and check["remediation"] is None
    assert "CONVERT_WARM=false" in check["summary"] and "cold latexmlc" in check["summary"]
    assert check["details"] == {"warm": False, "answering": None, "pools": []}
    assert metrics_scrape(api, token)["ccs_convert_warm_up"][()] == 0
