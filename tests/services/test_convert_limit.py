"""The /convert limit across web processes, against real gunicorn servers started as `manage.py up`
starts its web tier, real LaTeXML and the test database: a conversion holds one slot and one thread,
never a whole web process; over the limit the answer is an immediate 503 with Retry-After; a slot
comes back when its conversion ends or its process is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from conversion.engine import LATEXMLC_NICENESS
from ops.stack import web_child
from services.convert_slots import convert_slots_busy
from tests.support import PROJECT_DIR, child_env, free_port, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

# A TeX loop that keeps latexmlc busy on one CPU at constant memory until it is killed
# (LaTeXML refuses `\def\x{\x}\x` at once: "expands into itself").
TEX_LOOP = "\\documentclass{article}\\begin{document}\\loop\\iftrue\\repeat\\end{document}"
FORMULA = "literal:x^2+1"


class Web:
    """One gunicorn master with its worker processes, on a free port, with the given VAR_DIR and TMPDIR."""

    def __init__(self, var_dir: Path, tmpdir: Path, log: Path, *, processes: int = 1) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        child = web_child(host="127.0.0.1", port=self.port, processes=processes)
        env = child_env(
            VAR_DIR=str(var_dir), TMPDIR=str(tmpdir), CONVERT_CONCURRENCY="1", CONVERT_TIMEOUT_SECONDS="120"
        )
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            child.argv, cwd=PROJECT_DIR, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        wait_until(self._answers, timeout=60, message=f"gunicorn on {self.base_url} (log {log})")

    def _answers(self) -> bool:
        assert self.process.poll() is None, "gunicorn exited"
        try:
            return get(f"{self.base_url}/healthz", timeout=2)[0] == 200
        except OSError:
            return False

    def workers(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    def stop(self) -> None:
        with _suppress_gone():
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            with _suppress_gone():
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._log.close()


def _suppress_gone():
    import contextlib

    return contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess)


def get(url: str, *, timeout: float) -> tuple[int, dict, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def convert(base_url: str, *, wait: float, **fields: str) -> tuple[int, dict, dict]:
    """POST /convert with form `fields`, waiting at most `wait` seconds for the answer."""
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(f"{base_url}/convert", data=data, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=wait) as response:  # noqa: S310
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


class Background:
    """A request made in a thread; `result` holds (status, headers, body) or the exception once done."""

    def __init__(self, call, *args: object, **kwargs: object) -> None:
        self.result: object = None
        self.done = threading.Event()

        def run() -> None:
            try:
                self.result = call(*args, **kwargs)
            except Exception as exc:  # the test asserts on it
                self.result = exc
            self.done.set()

        threading.Thread(target=run, daemon=True).start()


@pytest.fixture
def var_dir(tmp_path: Path) -> Path:
    path = tmp_path / "var"
    path.mkdir()
    return path


@pytest.fixture
def servers(var_dir: Path, process_tmpdir: Path, tmp_path: Path):
    """Two web servers sharing one VAR_DIR and TMPDIR (as the web processes of one machine do), limit 1."""
    started: list[Web] = []
    try:
        for name in ("a", "b"):
            started.append(Web(var_dir, process_tmpdir, tmp_path / f"gunicorn-{name}.log"))
        yield started
    finally:
        for web in started:
            web.stop()


def _conversions(web: Web) -> list[psutil.Process]:
    """The processes of the conversions running under `web`'s workers (latexmlc and what it runs)."""
    found = []
    for worker in web.workers():
        with _suppress_gone():
            descendants = worker.children(recursive=True)
            if any("latexmlc" in " ".join(process.cmdline()) for process in descendants):
                found += descendants
    return found


def _slots_busy(var_dir: Path) -> int:
    return convert_slots_busy(limit=1, directory=var_dir / "run" / "convert-slots")


def _assert_refused_at_once(base_url: str) -> None:
    started = time.monotonic()
    status, headers, body = convert(base_url, wait=30, tex=FORMULA, whatsin="math", whatsout="math")
    elapsed = time.monotonic() - started
    assert status == 503, body
    assert headers["Content-Type"] == "application/problem+json"
    assert int(headers["Retry-After"]) >= 1
    assert body["status"] == 503 and body["status_code"] == 3 and body["log"].startswith("Fatal:input:busy")
    assert elapsed < 1.5, f"the refusal took {elapsed:.2f} s"


def _assert_healthz_fast(base_url: str) -> None:
    for _ in range(5):
        started = time.monotonic()
        status, _, _ = get(f"{base_url}/healthz", timeout=10)
        elapsed = time.monotonic() - started
        assert status == 200 and elapsed < 1.0, f"/healthz answered {status} after {elapsed:.2f} s"


def test_a_running_conversion_holds_the_one_slot_for_every_process_until_it_ends(servers, var_dir, process_tmpdir):
    a, b = servers
    loop = Background(convert, a.base_url, wait=120, tex=TEX_LOOP, timeout="15")
    latexml = wait_until(lambda: _conversions(a), timeout=30, interval=0.05, message="the loop's latexmlc")
    assert _slots_busy(var_dir) == 1
    # At a lower CPU priority than the web tier, which runs at the default 0.
    assert [process.nice() for process in latexml] == [LATEXMLC_NICENESS] * len(latexml)

    _assert_refused_at_once(b.base_url)  # another web process
    _assert_refused_at_once(a.base_url)  # the conversion's own process, on another of its threads
    _assert_healthz_fast(a.base_url)  # the process running the conversion still answers
    _assert_healthz_fast(b.base_url)

    assert loop.done.wait(60), "the loop was not stopped at its timeout"
    status, _, body = loop.result
    assert status == 200 and body["status"] == "fatal" and "Fatal:timeout:timedout" in body["log"], body
    assert _slots_busy(var_dir) == 0
    status, _, body = convert(b.base_url, wait=60, tex=FORMULA, whatsin="math", whatsout="math")
    assert status == 200 and body["status"] == "no_problem", body
    assert sorted(process_tmpdir.iterdir()) == []  # each conversion, the one killed at its timeout too, removed its own


def test_a_killed_web_process_gives_its_slot_back(servers, var_dir):
    a, b = servers
    Background(convert, a.base_url, wait=120, tex=TEX_LOOP, timeout="120")
    latexml = wait_until(lambda: _conversions(a), timeout=30, interval=0.05, message="the loop's latexmlc")
    assert _slots_busy(var_dir) == 1
    _assert_refused_at_once(b.base_url)

    (worker,) = a.workers()
    worker.kill()
    worker.wait(10)
    try:
        wait_until(lambda: _slots_busy(var_dir) == 0, timeout=10, interval=0.05, message="the slot to be freed")
        status, _, body = convert(b.base_url, wait=60, tex=FORMULA, whatsin="math", whatsout="math")
        assert status == 200 and body["status"] == "no_problem", body
        # latexmlc runs in its own session; its parent-death signal, not the session, ends it.
        _, alive = psutil.wait_procs(latexml, timeout=10)
        assert not alive, f"the killed worker's conversion is still running: {alive}"
    finally:
        for process in latexml:
            with _suppress_gone():
                process.kill()
