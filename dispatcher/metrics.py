"""The ingestion counters the dispatcher's sink keeps in Redis (results ingested, the batch latency
histogram), written here and read by the web's GET /metrics (ops.metrics): the sink is another process,
so an in-process counter would never reach the web's /metrics. Beside them, while the sink takes no result
for want of room on the results disk, its record of that (since when, why), which health reads."""

from __future__ import annotations

import json
import logging
import threading
from typing import TypedDict

import redis

from config.redis_client import redis_client

logger = logging.getLogger(__name__)

# Redis keys of the sink's counters: results ingested, and the batch latency histogram as a hash of
# per-bucket counts (not cumulative; the collector accumulates them) plus "sum" and "count".
INGESTED_KEY = "ccs:metrics:results_ingested"
LATENCY_KEY = "ccs:metrics:ingest_batch_seconds"
LATENCY_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_INF = "+Inf"
# The sink's record of holding results back: written again every second while it holds them, so that it
# lapses on its own when the sink is gone.
HELD_KEY = "ccs:sink:results_held"
HELD_TTL_SECONDS = 10


class HeldRecord(TypedDict):
    """The sink's record while it holds results back, as JSON under HELD_KEY (results_held_record)."""

    since: float
    reason: str
    free_bytes: int | None


_client: redis.Redis | None = None
_client_lock = threading.Lock()


def _redis() -> redis.Redis:
    global _client
    with _client_lock:
        if _client is None:
            _client = redis_client(socket_connect_timeout=1, socket_timeout=1)
        return _client


def _bucket_of(seconds: float) -> str:
    return next((str(bound) for bound in LATENCY_BUCKETS if seconds <= bound), _INF)


def ingest_record(results: int, seconds: float) -> None:
    """In the sink, after a batch is applied: add its results and its latency, in one MULTI. A Redis that
    does not answer costs the metrics, never the ingestion (logged)."""
    try:
        pipe = _redis().pipeline(transaction=True)
        pipe.incrby(INGESTED_KEY, results)
        pipe.hincrby(LATENCY_KEY, _bucket_of(seconds), 1)
        pipe.hincrby(LATENCY_KEY, "count", 1)
        pipe.hincrbyfloat(LATENCY_KEY, "sum", seconds)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("ingestion metrics not recorded: %s", exc)


def ingest_read() -> tuple[int, list[tuple[str, int]], float]:
    """(results ingested, cumulative histogram buckets as (le, count) ending with +Inf, sum of seconds)."""
    pipe = _redis().pipeline(transaction=True)
    pipe.get(INGESTED_KEY)
    pipe.hgetall(LATENCY_KEY)
    ingested, raw = pipe.execute()
    fields = {key.decode(): value.decode() for key, value in raw.items()}
    buckets: list[tuple[str, int]] = []
    total = 0
    for bound in (*(str(bound) for bound in LATENCY_BUCKETS), _INF):
        total += int(fields.get(bound, 0))
        buckets.append((bound, total))
    return int(ingested or 0), buckets, float(fields.get("sum", 0.0))


def results_held_record(*, since: float, reason: str, free_bytes: int | None) -> None:
    """In the sink, every second while it takes no result: since when (Unix time) and why. A Redis that does
    not answer costs the record, never the sink (logged)."""
    held: HeldRecord = {"since": since, "reason": reason, "free_bytes": free_bytes}
    record = json.dumps(held)
    try:
        _redis().set(HELD_KEY, record, ex=HELD_TTL_SECONDS)
    except redis.RedisError as exc:
        logger.warning("the sink's hold not recorded: %s", exc)


def results_held_clear() -> None:
    """In the sink, when it takes results again (or stops)."""
    try:
        _redis().delete(HELD_KEY)
    except redis.RedisError as exc:
        logger.warning("the sink's hold not cleared: %s", exc)


def results_held_read() -> HeldRecord | None:
    """The sink's record while it holds results back, else None; raises RedisError when Redis does not answer."""
    raw = _redis().get(HELD_KEY)
    if not raw:
        return None
    record: HeldRecord = json.loads(raw)
    return record
