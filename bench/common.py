"""Set-up shared by the benchmark scripts: a dedicated database (`ccs_bench`) on the real PostgreSQL,
a Redis database of its own, migrations, and small helpers (timer, actor and token, percentiles,
clean removal of a corpus left by an earlier run).

Import this module before anything from Django or the project: it sets the environment and calls
django.setup() itself.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "ccs_bench"
PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
BENCH_ROOT = Path("/tmp/ccs-bench")
CORPUS_ROOT = BENCH_ROOT / "corpora"
ACTOR = "bench"

# Before django.setup(): settings read these once, at import.
os.environ["DATABASE_URL"] = f"{PG_SERVER}/{BENCH_DB}"
os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/14"
os.environ["CORPUS_ROOTS"] = str(CORPUS_ROOT)
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ.setdefault("LOG_LEVEL", "WARNING")
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))


def database_ensure() -> None:
    """Create the benchmark database on the server if it is not there yet."""
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def setup() -> None:
    """Database, Django and migrations; call once at the top of each script."""
    import django

    CORPUS_ROOT.mkdir(parents=True, exist_ok=True)
    database_ensure()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


@dataclass
class Timer:
    """Wall-clock seconds of a `with timed() as t:` block, in `t.seconds` once the block ends."""

    started: float = 0.0
    seconds: float = 0.0


@contextmanager
def timed() -> Iterator[Timer]:
    timer = Timer(started=time.perf_counter())
    try:
        yield timer
    finally:
        timer.seconds = time.perf_counter() - timer.started


def load_line() -> str:
    """The machine's load averages, printed with each result: the machine is shared, and a busy one
    makes every number here slower."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


def quiet_wait(max_load: float, limit_seconds: float) -> None:
    """Wait until the 1-minute load average is at most `max_load`, for at most `limit_seconds`."""
    deadline = time.monotonic() + limit_seconds
    if os.getloadavg()[0] > max_load:
        print(f"waiting for the machine to quiet down (1-min load <= {max_load}): {load_line()}", flush=True)
    while os.getloadavg()[0] > max_load:
        if time.monotonic() > deadline:
            print(f"still busy after {limit_seconds:.0f} s; measuring anyway: {load_line()}", flush=True)
            return
        time.sleep(5)
    print(f"start: {load_line()}", flush=True)


def bench_token() -> str:
    """A fresh raw API token for the bench actor (tokens are stored hashed, so one per run)."""
    from accounts.actions import token_create

    _, raw = token_create(actor=ACTOR, created_by=ACTOR)
    return raw


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile (0..1) by linear interpolation between the closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def corpus_delete_if_exists(name: str) -> float | None:
    """Delete a corpus left by an earlier run, so a rerun starts clean; returns seconds, or None."""
    from corpora.actions import corpus_delete
    from corpora.models import Corpus

    if not Corpus.objects.filter(name=name).exists():
        return None
    with timed() as timer:
        corpus_delete(name=name, confirm=name, actor=ACTOR)
    return timer.seconds


def corpus_purge_unchecked(name: str) -> float | None:
    """Bench-only clean-up of a corpus too large for corpus_delete (see bench/README.md): the same
    purge, with foreign-key and count triggers off (session_replication_role = replica, superuser
    only). The purge deletes the corpus's count rows itself, so the counts stay exact."""
    from django.db import connection, transaction

    from corpora.actions import _corpus_purge
    from corpora.models import Corpus

    corpus_id = Corpus.objects.filter(name=name).values_list("pk", flat=True).first()
    if corpus_id is None:
        return None
    with timed() as timer, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
        _corpus_purge(corpus_id)
    return timer.seconds


def fail(message: str) -> None:
    """Stop the benchmark loudly: a wrong result makes its timing meaningless."""
    print(f"FAILED: {message}", file=sys.stderr)
    raise SystemExit(1)
