"""Helpers for tests that start real processes against the test database and broker."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

PROJECT_DIR = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """A DATABASE_URL naming the database the tests run in (the test_ one, not the main one)."""
    s = connection.settings_dict
    auth = quote(s["USER"]) + (":" + quote(s["PASSWORD"]) if s["PASSWORD"] else "")
    if s["HOST"].startswith("/"):
        return f"postgresql://{auth}@/{s['NAME']}?host={quote(s['HOST'])}"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgresql://{auth}@{s['HOST']}{port}/{s['NAME']}"


def migrate(targets: list[tuple[str, str]] | None = None) -> None:
    """Migrate the test database to `targets`, or to the latest migrations of every app."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=test_database_url(),
        REDIS_URL=settings.REDIS_URL,
        VAR_DIR=str(settings.VAR_DIR),
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONUNBUFFERED="1",
        DB_POOL="false",
    )
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_celery_worker(*, tmpdir: Path, concurrency: int = 1, name: str = "test") -> subprocess.Popen:
    """A real Celery worker on the test broker and database, with the test-only job kinds loaded, and
    `tmpdir` (the test's own) as its TMPDIR: a worker killed outright leaves its pool's temporary
    directories (pymp-*) there."""
    argv = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "--include", "tests.jobkinds",
        "--loglevel", "INFO", "--concurrency", str(concurrency), "--pool", "prefork",
        "--hostname", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    return subprocess.Popen(argv, cwd=PROJECT_DIR, env=child_env(TMPDIR=str(tmpdir)), start_new_session=True)


def wait_until(predicate, timeout: float, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def installed_latexmlc_version() -> str:
    """What the machine's latexmlc says of its version, asked directly (no sandbox): the first line of
    `latexmlc --VERSION`, as a worker reports it, whichever LaTeXML scripts/system-packages installed."""
    said = subprocess.run(["latexmlc", "--VERSION"], capture_output=True, text=True, timeout=60, check=True)
    return next(line.strip() for line in (said.stdout + "\n" + said.stderr).splitlines() if line.strip())


TEX_DOCUMENT = "\\documentclass{article}\n\\begin{document}\nHello.\n\\end{document}\n"
TEX_FRAGMENT = "\\section{Part}\nA fragment that is \\input by the main file.\n"


def write_tex(path: Path, text: str = TEX_DOCUMENT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_zip(path: Path, members: dict[str, str]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def write_targz(path: Path, members: dict[str, str]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


# The first line of /etc/passwd (root's): a leak of the file shows it.
PASSWD_LINE = Path("/etc/passwd").read_text().splitlines()[0]


@dataclass
class Planted:
    """Files with unique markers outside the working directory: beside it and in the project's var/."""

    markers: dict[str, str]  # attack name -> the marker its file holds
    document: str

    def leaked(self, text: str) -> list[str]:
        return sorted(name for name, marker in self.markers.items() if marker in text)


@contextlib.contextmanager
def plant(outside: Path, work: Path) -> Iterator[Planted]:
    """Plant one marker file per attack and yield a document that tries all of them from `work`."""
    token = uuid.uuid4().hex[:10]
    markers = {name: f"LEAK{name}{token}" for name in ("abs", "rel", "read", "incabs", "increl", "var", "varrel")}
    outside.mkdir(parents=True, exist_ok=True)
    for name in ("abs", "rel", "incabs", "increl"):
        (outside / f"{name}.tex").write_text(f"{markers[name]} marker text.\n")
    (outside / "read.txt").write_text(f"{markers['read']} marker text.\n")
    var_files = [settings.VAR_DIR / f"sandbox-test-{token}-{name}.tex" for name in ("var", "varrel")]
    for path, name in zip(var_files, ("var", "varrel"), strict=True):
        path.write_text(f"{markers[name]} marker text.\n")

    def up_from(path: Path) -> str:
        # Relative and climbing out of the working directory: enough ../ to reach / from any depth.
        return "../" * (len(work.parts) + 3) + str(path).lstrip("/")

    document = "\n".join([
        "\\documentclass{article}", "\\usepackage{verbatim}", "\\begin{document}", "Start.",
        "\\verbatiminput{/etc/passwd}",
        "\\input{/etc/passwd}",
        f"\\input{{{outside / 'abs.tex'}}}",
        f"\\input{{{os.path.relpath(outside / 'rel.tex', work)}}}",
        f"\\input{{{settings.VAR_DIR / 'secret_key'}}}",
        f"\\input{{{var_files[0]}}}",
        f"\\input{{{up_from(var_files[1])}}}",
        "\\newread\\secretfile", f"\\openin\\secretfile={outside / 'read.txt'}",
        "\\read\\secretfile to\\secretline", "\\closein\\secretfile", "Read: \\secretline.",
        f"\\include{{{outside / 'incabs'}}}",
        f"\\include{{{up_from(outside / 'increl')}}}",
        "End.", "\\end{document}", "",
    ])  # fmt: skip
    try:
        yield Planted(markers=markers, document=document)
    finally:
        for path in var_files:
            path.unlink(missing_ok=True)


def write_zero_bomb(path: Path, size: int) -> Path:
    """A gzipped tar of one file of `size` zero bytes (a few MB on disk per GiB unpacked), written chunk by
    chunk without holding it in memory."""
    import gzip
    import io
    import tarfile

    chunk = bytes(1024 * 1024)

    class Zeros(io.RawIOBase):
        left = size

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray) -> int:
            count = min(len(buffer), self.left, len(chunk))
            buffer[:count] = chunk[:count]
            self.left -= count
            return count

    path.parent.mkdir(parents=True, exist_ok=True)
    info = tarfile.TarInfo("main.tex")
    info.size = size
    with gzip.open(path, "wb", compresslevel=1) as packed, tarfile.open(fileobj=packed, mode="w") as archive:
        archive.addfile(info, io.BufferedReader(Zeros(), buffer_size=len(chunk)))
    return path


def metrics_scrape(api, token: str) -> dict[str, dict[tuple, float]]:
    """/metrics as the test client reads it: sample name -> {sorted label items: value}."""
    from prometheus_client.parser import text_string_to_metric_families

    response = api.get("/metrics", {"token": token})
    assert response.status_code == 200, response.content
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples
