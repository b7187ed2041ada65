"""ccs runs as a subprocess, the installed console script beside this interpreter, against pytest-django's
live server (a threaded server on the test database), with a config directory of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from accounts.models import Passkey
from corpora.actions.history import snapshot_append
from jobs.models import Job
from tests.accounts.authenticator import Authenticator
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import classes_write, pair_close

CCS = Path(sys.executable).parent / "ccs"


def ccs_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment without any CCS_ setting of the machine, HOME and XDG_CONFIG_HOME the test's."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("CCS_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), COLUMNS="200", NO_COLOR="1")
    env.update(extra)
    return env


@pytest.fixture
def ccs_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def ccs(live_server: Any, token: str, ccs_home: Path) -> Callable[..., subprocess.CompletedProcess]:
    """Run `ccs *args` against the live server with the test's token (CCS_URL, CCS_TOKEN)."""
    assert CCS.exists(), f"{CCS} is not installed: pip install --no-deps -e . (make test does)"

    def run(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
        environment = ccs_env(ccs_home, **{"CCS_URL": live_server.url, "CCS_TOKEN": token, **env})
        return subprocess.run(
            [str(CCS), *args], input=stdin, capture_output=True, text=True, env=environment, timeout=120, check=False
        )

    return run


class Running:
    """A ccs process started in the background; its stderr lines gathered as they come (a progress line is
    waited for with a deadline while the test moves the run on)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        """Its exit code, stdout and stderr once it ends (within `timeout`)."""
        stdout = self.process.stdout.read()
        self.process.wait(timeout)
        self.reader.join(timeout)
        return self.process.returncode, stdout, "\n".join(self.lines)


@pytest.fixture
def ccs_start(live_server: Any, token: str, ccs_home: Path) -> Iterator[Callable[..., Running]]:
    """Start `ccs *args` in the background against the live server, as `ccs` runs it; killed at the end."""
    started: list[subprocess.Popen] = []

    def start(*args: str, **env: str) -> Running:
        environment = ccs_env(ccs_home, **{"CCS_URL": live_server.url, "CCS_TOKEN": token, **env})
        process = subprocess.Popen(
            [str(CCS), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
        )
        started.append(process)
        return Running(process)

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.fixture
def http(live_server: Any, token: str) -> httpx.Client:
    """The API itself, with the same token, to compare ccs's output with."""
    with httpx.Client(base_url=live_server.url, headers={"X-Service-Token": token}, timeout=60) as client:
        yield client


MISSING = ("warning", "missing_file", "x.sty")
UNDEFINED = ("error", "undefined", "\\alpha")
IO_FATAL = ("fatal", "I/O", "a/b.tex")  # category and what that hold '/'


@pytest.fixture
def pair(corpus_root: Path) -> dict[str, str]:
    """Corpus a (doc0..doc3) under tex_to_html with messages of three classes in two snapshots (the run's
    close, then one more), the service `next` activated beside it, and a passkey of the token's actor."""
    imported(corpus_root, "a", documents=4)
    activated("a")
    classes_write([{MISSING}, {UNDEFINED}, set(), {IO_FATAL}])
    pair_close()
    classes_write([{MISSING}, {UNDEFINED, MISSING}, {MISSING}, {IO_FATAL}])
    snapshot_append(corpus_name="a", service_name="tex_to_html", actor="tester")
    activated("a", "next")
    authenticator = Authenticator(rp_id="localhost", origin="http://localhost:8000")
    passkey = Passkey.objects.create(
        actor="tester", name="laptop", credential_id=authenticator.id, public_key=authenticator._cose_key()
    )
    return {"job": str(Job.objects.order_by("created_at").first().uuid), "passkey": str(passkey.pk)}
