"""`manage.py up` on its embedded servers when one of them is killed outright in the middle of a run: `up`
starts it again, every process reconnects, and the run ends with every task final once and every result
archive saying what the database says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import psutil
import psycopg
import pytest

from conversion.logparse import parse_log
from tests.dispatcher.harness import wait_for
from tests.ops.test_up import Up, _embedded_env, _get, _own_processes, _ports, _postmaster_pid
from tests.support import PROJECT_DIR

pytestmark = pytest.mark.slow

SERVICE = "outage_html"  # its own: `up` registers tex_to_html on a first start
# Small documents LaTeXML converts in a few seconds each: enough of them that a kill after the first results
# falls in the middle of the run, with conversions under way and results on their way to the sink.
DOCUMENTS = 10
RECOVERY_SECONDS = 90  # from the kill to every task final


def _document(number: int) -> str:
    body = f"Document {number}: $x^{number}$." if number % 3 else f"An \\undefinedmacro{{}} in {number}."
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n"


def _manage(env: dict[str, str], *argv: str) -> None:
    """A command run beside `up`, on the same embedded servers."""
    done = subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"manage.py {' '.join(argv)}: {done.stderr}"


def _database(var_dir: Path) -> str:
    """The embedded PostgreSQL's URL, from the socket directory its pid file names."""
    lines = (var_dir / "pgdata" / "postmaster.pid").read_text().splitlines()
    return f"postgresql://postgres@/ccs?host={lines[4]}"


def _tasks(var_dir: Path) -> list[tuple[int, int, int, int]] | None:
    """(task id, corpus id, service id, status) of the service's tasks; None while the database does not answer."""
    try:
        with psycopg.connect(_database(var_dir), connect_timeout=2) as conn:
            return conn.execute(
                "SELECT t.id, t.corpus_id, t.service_id, t.status FROM corpora_task t"
                " JOIN services_service s ON s.id = t.service_id WHERE s.name = %s ORDER BY t.id",
                [SERVICE],
            ).fetchall()
    except (psycopg.Error, OSError, IndexError):
        return None


def _final(tasks: list[tuple[int, int, int, int]] | None) -> int:
    return sum(1 for *_, status in tasks or [] if status < 0)


def _every_task_final(stack: Stack, at: float) -> None:
    """Every task final within RECOVERY_SECONDS of the fault at monotonic time `at`."""
    wait_for(
        lambda: _final(_tasks(stack.var_dir)) == DOCUMENTS, RECOVERY_SECONDS - (time.monotonic() - at), interval=0.5,
        message=lambda: f"every task final; tasks: {_tasks(stack.var_dir)}\n" + "\n".join(stack.output(60)),
    )  # fmt: skip


def _assert_every_task_final_once(var_dir: Path) -> None:
    """Every task has a result status, its counts bucket says so, and its one result archive carries that status."""
    tasks = _tasks(var_dir)
    assert tasks is not None and len(tasks) == DOCUMENTS
    assert all(-5 <= status <= -1 for *_, status in tasks), tasks
    with psycopg.connect(_database(var_dir)) as conn:
        counted = dict(
            conn.execute(
                "SELECT c.bucket, c.count FROM corpora_taskcount c JOIN services_service s ON s.id = c.service_id"
                " WHERE s.name = %s AND c.count <> 0",
                [SERVICE],
            ).fetchall()
        )
        runtimes = conn.execute(
            "SELECT count(*) FROM corpora_taskruntime WHERE task_id = ANY(%s)", [[task for task, *_ in tasks]]
        ).fetchone()[0]
    by_status: dict[int, int] = {}
    for *_, status in tasks:
        by_status[status] = by_status.get(status, 0) + 1
    assert counted == by_status
    assert runtimes == DOCUMENTS
    for task, corpus, service, status in tasks:
        archive = var_dir / "results" / str(corpus) / str(service) / f"{task}.zip"
        with zipfile.ZipFile(archive) as result:
            assert parse_log(result.read("cortex.log")).status == status, task
    stored = list((var_dir / "results").rglob("*.zip"))
    assert len(stored) == DOCUMENTS


class Stack:
    """`up` with its own data directory, ports and TMPDIR, a corpus of small documents imported and activated."""

    def __init__(self, process_tmpdir: Path) -> None:
        self.var_dir = Path(tempfile.mkdtemp(prefix="ccs-up-", dir="/tmp"))  # short: unix socket paths are limited
        port, dispatcher = _ports()
        self.base = f"http://127.0.0.1:{port}"
        self.env = _embedded_env(self.var_dir, process_tmpdir, **dispatcher)
        self.up = Up(port, "--no-demo", "--workers", "2", env=self.env)

    def start_run(self) -> None:
        self.token = self.up.wait_for("TOKEN=").split("=", 1)[1]
        self.up.wait_for("BASE_URL=")
        corpus = self.var_dir / "corpora" / "outage"
        corpus.mkdir(parents=True)
        for number in range(DOCUMENTS):
            (corpus / f"doc{number}.tex").write_text(_document(number))
        # A lease a dispatcher restart leaves behind comes back within the test's bound.
        _manage(self.env, "register_service", SERVICE, "--lease-seconds", "30")
        _manage(self.env, "import_corpus", "outage", str(corpus))
        _manage(self.env, "activate_service", "outage", SERVICE)

    def in_the_middle(self) -> None:
        """Wait until some results are in and most tasks are still to come."""
        wait_for(lambda: 1 <= _final(_tasks(self.var_dir)) <= DOCUMENTS // 2, 120, 0.5, "the first results")

    def child(self, part: str) -> psutil.Process | None:
        for process in psutil.Process(self.up.process.pid).children():
            try:
                if part in " ".join(process.cmdline()) and process.status() != psutil.STATUS_ZOMBIE:
                    return process
            except psutil.Error:
                continue
        return None

    def health(self) -> dict[str, str]:
        """Each health check's status, by name."""
        return {check["name"]: check["status"] for check in _get(f"{self.base}/api/health", self.token)[1]["checks"]}

    def logged(self, text: str) -> bool:
        """Whether `up` has printed a line containing `text` so far."""
        return any(text in line for line in self.output())

    def output(self, last: int | None = None) -> list[str]:
        """`up`'s lines so far (the `last` ones)."""
        while not self.up.lines.empty():
            self.up.seen.append(self.up.lines.get())
        return self.up.seen[-last:] if last else self.up.seen

    def close(self) -> None:
        if self.up.process.poll() is None:
            assert self.up.stop() == 0
        for process in _own_processes(self.var_dir):
            process.kill()
        subprocess.run(["rm", "-rf", str(self.var_dir)], check=False)


@pytest.fixture
def stack(process_tmpdir):
    stack = Stack(process_tmpdir)
    try:
        yield stack
    finally:
        stack.close()


def test_up_starts_a_killed_embedded_postgresql_again_and_the_run_ends_with_every_task_final_once(stack):
    stack.start_run()
    stack.in_the_middle()
    killed = _postmaster_pid(stack.var_dir)
    os.kill(killed, signal.SIGKILL)
    at = time.monotonic()

    def restarted() -> bool:
        pid = _postmaster_pid(stack.var_dir)
        return pid not in (None, killed) and psutil.pid_exists(pid) and _tasks(stack.var_dir) is not None

    wait_for(restarted, 30, 0.5, lambda: "up to start PostgreSQL again:\n" + "\n".join(stack.output(40)))
    back = time.monotonic() - at
    # The keeper says so once its restart returns, which can be just after the server first answers.
    wait_for(
        lambda: stack.logged("the embedded PostgreSQL runs again"), 10, 0.2,
        lambda: "up to log the restart:\n" + "\n".join(stack.output(40)),
    )  # fmt: skip
    _every_task_final(stack, at)
    print(
        f"PostgreSQL answered again {back:.1f} s after the kill; the run ended {time.monotonic() - at:.1f} s after it"
    )
    _assert_every_task_final_once(stack.var_dir)
    assert stack.up.process.poll() is None
    assert stack.health()["postgresql"] == "ok"


def test_up_starts_a_killed_embedded_redis_again_and_jobs_run_after_it(stack):
    stack.start_run()
    stack.in_the_middle()
    redis = stack.child("redis-server")
    assert redis is not None
    redis.kill()
    at = time.monotonic()

    def redis_back() -> bool:
        again = stack.child("redis-server")
        if again is None or again.pid == redis.pid:
            return False
        return stack.health()["redis"] == "ok"

    wait_for(redis_back, 30, 0.5, lambda: "Redis to answer again:\n" + "\n".join(stack.output(40)))
    back = time.monotonic() - at
    _every_task_final(stack, at)
    _assert_every_task_final_once(stack.var_dir)

    # A job sent once Redis is back runs on the Celery worker (the embedded Redis came back empty).
    after = stack.var_dir / "corpora" / "after"
    after.mkdir()
    (after / "one.tex").write_text(_document(1))
    sent = time.monotonic()
    status, job = _post(f"{stack.base}/api/corpora", stack.token, {"name": "after", "path": str(after)})
    assert status == 202, job

    def job_state() -> str | None:
        state = _get(f"{stack.base}/api/jobs/{job['uuid']}", stack.token)[1].get("state")
        return state if state in ("succeeded", "failed", "interrupted") else None

    assert wait_for(job_state, 60, 0.5, lambda: f"the job to end: {job}\n" + "\n".join(stack.output(60))) == "succeeded"
    print(
        f"Redis answered again {back:.1f} s after the kill; a job sent after it ran in {time.monotonic() - sent:.1f} s"
    )


def _post(url: str, token: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(  # noqa: S310
        url, data=json.dumps(body).encode(), method="POST",
        headers={"X-Service-Token": token, "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
