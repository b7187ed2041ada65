"""POST /convert through the warm engine (conversion/warm.py): a real WarmEngine answering on the socket the
settings name, under a VAR_DIR of the test's own, with real LaTeXML in the real sandbox. A warm answer is the
cold one, says that the warm engine gave it and keeps the limits of the endpoint (its slots, its input checks);
with no engine running the request is converted cold and says why."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from conversion.engine import Limits, latexmlc_path
from conversion.warm import Profile, WarmEngine, serving
from services.convert_slots import convert_slot_take
from services.queries import convert_engine_socket
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

PROBLEM = "application/problem+json"
# What /convert asks the engine for: a formula as XML (presentation MathML, as /convert sets it), a document.
FORMULA = Profile(format="xml", whatsin="math", whatsout="math", pmml=True)
DOCUMENT = Profile()
START_SECONDS = 120


def _post(client, **fields: str):
    return client.post("/convert", fields)


@pytest.fixture
def var_dir(settings) -> Iterator[Path]:
    """A VAR_DIR of the test's own, short (a Unix socket's path is at most 107 bytes): its run/ holds the
    engine's socket and the warm slots."""
    path = Path(tempfile.mkdtemp(prefix="ccs-warm-"))
    settings.VAR_DIR = path
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def engine() -> Iterator[WarmEngine]:
    """One engine for the module, with the limits `manage.py convert_engine` gives it, its pools ready."""
    latexmlc_path()
    limits = Limits(django_settings.CONVERT_TIMEOUT_SECONDS, django_settings.CONVERSION_MEMORY_MB,
                    django_settings.CONVERSION_DISK_MB, django_settings.CONVERSION_MAX_PROCESSES)  # fmt: skip
    warm = WarmEngine({FORMULA: 1, DOCUMENT: 1}, limits=limits)
    warm.start()
    try:

        def ready() -> bool:
            return all(pool["ready"] == pool["servers"] for pool in warm.status())

        wait_until(ready, START_SECONDS, 0.05, "the warm engine's pools")
        yield warm
    finally:
        warm.stop()


@pytest.fixture
def running(engine: WarmEngine, var_dir: Path) -> Iterator[WarmEngine]:
    """The engine answering on the socket the settings name (convert_engine_socket)."""
    with serving(engine, convert_engine_socket()) as server:
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield engine
        finally:
            server.shutdown()
            thread.join(10)


def _served(engine: WarmEngine, profile: Profile) -> int:
    return engine.pools[profile].status()["served"]


def test_a_formula_is_converted_warm_and_answered_as_the_cold_path_answers_it(api, settings, running):
    before = _served(running, FORMULA)
    warm = _post(api, tex="literal:x^2+1", whatsin="math", whatsout="math", format="xml")
    assert warm.status_code == 200, warm.content
    body = warm.json()
    assert body["engine"] == "warm" and "engine_note" not in body
    assert _served(running, FORMULA) == before + 1
    assert (body["status"], body["status_code"]) == ("no_problem", 0)
    assert "msup>" in body["result"] and "Status:conversion:0" in body["log"]

    settings.CONVERT_WARM = False
    cold = _post(api, tex="literal:x^2+1", whatsin="math", whatsout="math", format="xml").json()
    assert cold["engine"] == "latexmlc" and "engine_note" not in cold
    assert _served(running, FORMULA) == before + 1
    fields = ("result", "status", "status_code")
    assert [body[name] for name in fields] == [cold[name] for name in fields]


def test_a_warm_document_gets_the_output_checks_of_a_cold_one(api, running):
    tex = "\\documentclass{article}\\begin{document}\\iffalse A hidden body. \\fi\\end{document}"
    body = _post(api, tex=tex, format="html5").json()
    assert body["engine"] == "warm"
    assert "Status:conversion:0" in body["log"]  # LaTeXML's own verdict
    assert body["status"] == "error" and body["status_code"] == 2
    assert "\nError:output_empty:body the document is empty" in body["log"]
    assert body["log"].endswith("Status:conversion:2\n")


def test_without_a_running_engine_a_request_is_converted_cold_and_says_why(api, var_dir):
    assert not convert_engine_socket().exists()
    response = _post(api, tex="literal:x^2+1", whatsin="math", whatsout="math", format="xml")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["engine"] == "latexmlc" and body["engine_note"] == "the warm engine is not running"
    assert body["status"] == "no_problem" and "msup>" in body["result"]


def test_with_every_warm_slot_held_the_answer_is_an_immediate_503_with_retry_after(api, settings, running):
    settings.CONVERT_WARM_CONCURRENCY = 2
    held = [convert_slot_take(warm=True) for _ in range(2)]
    assert None not in held
    before = _served(running, FORMULA)
    try:
        response = _post(api, tex="literal:x", whatsin="math", whatsout="math", format="xml")
    finally:
        for slot in held:
            slot.release()
    assert response.status_code == 503 and response["Content-Type"] == PROBLEM
    assert int(response["Retry-After"]) >= 1
    body = response.json()
    assert body["status_code"] == 3 and body["log"].startswith("Fatal:input:busy")
    assert _served(running, FORMULA) == before  # refused, not converted cold instead
    again = _post(api, tex="literal:x", whatsin="math", whatsout="math", format="xml").json()
    assert again["engine"] == "warm" and again["status"] == "no_problem"


def test_empty_and_oversized_input_are_400s_that_reach_no_engine(api, settings, running):
    before = [pool["served"] for pool in running.status()]
    for tex in ("", "   ", "literal:"):
        response = _post(api, tex=tex)
        assert response.status_code == 400 and response["Content-Type"] == PROBLEM
        body = response.json()
        assert body["status_code"] == 3 and body["log"].startswith("Fatal:input:empty") and "engine" not in body
    settings.CONVERT_MAX_BYTES = 100
    response = _post(api, tex="x" * 101)
    assert response.status_code == 400 and "Fatal:input:too_large" in response.json()["log"]
    assert [pool["served"] for pool in running.status()] == before


def test_a_request_under_other_limits_than_the_engines_servers_is_converted_cold_under_its_own(api, settings, running):
    settings.CONVERSION_MEMORY_MB = django_settings.CONVERSION_MEMORY_MB // 2  # as PUT /api/config would set it
    before = _served(running, FORMULA)
    body = _post(api, tex="literal:x^2", whatsin="math", whatsout="math", format="xml").json()
    assert body["engine"] == "latexmlc"
    assert "other limits" in body["engine_note"]
    assert body["status"] == "no_problem" and "msup>" in body["result"]
    assert _served(running, FORMULA) == before


def test_a_request_finding_its_pool_at_capacity_is_refused_at_once_and_not_converted_cold(api, settings, running):
    settings.CONVERT_WARM_WAIT_SECONDS = 0
    pool = running.pools[FORMULA]
    loop = threading.Thread(
        target=lambda: running.convert(FORMULA, "\\loop\\iftrue\\repeat", timeout=5, wait=START_SECONDS), daemon=True
    )
    loop.start()
    try:
        wait_until(lambda: pool.status()["busy"] == 1, START_SECONDS, 0.01, "the formula server converting")
        started = time.monotonic()
        response = _post(api, tex="literal:x", whatsin="math", whatsout="math", format="xml")
        assert time.monotonic() - started < 1.0
        assert response.status_code == 503 and int(response["Retry-After"]) >= 1
        assert response.json()["log"].startswith("Fatal:input:busy")
    finally:
        loop.join(30)
