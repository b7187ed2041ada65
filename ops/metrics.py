"""Domain metrics for GET /metrics, beside django-prometheus': one custom Collector, registered once, that
computes its gauges at scrape time from cheap reads (the trigger-kept task counts, the partial lease index,
the jobs table, the connection pool's stats) and exposes the ingestion counters the dispatcher's sink
keeps in Redis (see docs/decisions/logs-and-metrics.md: the sink is another process, so an in-process
counter would never reach the web's /metrics).

Metric names: ccs_tasks{service,status}, ccs_backlog_tasks{service}, ccs_leases_in_flight{service},
ccs_leases_expired, ccs_jobs{state}, ccs_jobs_health{health}, ccs_db_pool_in_use, ccs_db_pool_waiting,
ccs_results_ingested_total, ccs_ingest_batch_seconds (histogram), ccs_results_disk_free_bytes and
ccs_results_disk_full (1 while the sink takes no result for want of room); per worker row (services.models.Worker),
from its heartbeats: ccs_worker_conversions_total{service,worker}, ccs_worker_peak_rss_bytes{service,worker}
and ccs_worker_kills_total{service,worker,reason} (every reason, 0 included); and the counters of the
dispatcher's row (services.models.DispatcherState), counted since its process started, as
ccs_dispatcher_<counter>_total: leased, dispatched, ingested, discarded, garbage, reaped, failed_for_retries,
released and retried. From the in-flight table and the worker rows: ccs_in_flight_conversions{service},
ccs_in_flight_past_p99{service} (conversions running past their service's 99th percentile runtime) and
ccs_service_waiting_unserved_tasks{service} (tasks waiting for a service no live worker serves). From the warm
engine of POST /convert (`manage.py convert_engine`), asked over its socket with a short timeout:
ccs_convert_warm_up (1 when it answered, 0 when it did not or CONVERT_WARM is off) and per pool, counted since the
engine started: ccs_convert_warm_servers{profile} (configured), ccs_convert_warm_ready{profile},
ccs_convert_warm_busy{profile}, ccs_convert_warm_served_total{profile}, ccs_convert_warm_failed_total{profile}
and ccs_convert_warm_restarts_total{profile}.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta

import redis
from django.conf import settings
from django.db import connection
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from config.live import get_config
from conversion.choices import TaskStatus
from corpora.queries.corpora import services_stranded
from corpora.results import results_space
from corpora.statuses import BUCKET_NAMES, QUEUED_BUCKET, STATUS_KEYS
from dispatcher.metrics import ingest_read, results_held_read
from ops.health import CONVERT_ENGINE_TIMEOUT_SECONDS
from services.queries import convert_engine_status, in_flight_list

logger = logging.getLogger(__name__)

# The dispatcher's counters, each exported as ccs_dispatcher_<name>_total, with its help text.
DISPATCHER_COUNTERS: dict[str, str] = {
    "leased": "Tasks the dispatcher leased",
    "dispatched": "Tasks the dispatcher handed to a worker",
    "ingested": "Results the dispatcher ingested",
    "discarded": "Results discarded: their task was no longer leased",
    "garbage": "Messages on the dispatcher's sockets that were neither a well-formed request nor a result",
    "reaped": "Expired leases the dispatcher gave back",
    "failed_for_retries": "Tasks made infrastructure failures: their leases ran out too often",
    "released": "Leases given back because their worker's heartbeats stopped",
    "retried": "Results the machine ended (infrastructure fatals) sent back for another attempt",
}

# Each warm pool's figures (conversion.warm.WarmPool.status), exported as ccs_convert_warm_<name>{profile}.
WARM_GAUGES: dict[str, str] = {
    "servers": "Servers a warm pool of /convert is configured with",
    "ready": "Servers of a warm pool prepared and running (busy or idle)",
    "busy": "Servers of a warm pool converting now",
}
WARM_COUNTERS: dict[str, str] = {
    "served": "Conversions a warm pool finished",
    "failed": "Conversions a warm pool lost because its server ended during them",
    "restarts": "Times a warm pool started a server again",
}

METRIC_NAMES: tuple[str, ...] = (
    "ccs_tasks", "ccs_backlog_tasks", "ccs_leases_in_flight", "ccs_leases_expired", "ccs_jobs", "ccs_jobs_health",
    "ccs_db_pool_in_use", "ccs_db_pool_waiting", "ccs_results_ingested_total", "ccs_ingest_batch_seconds",
    "ccs_results_disk_free_bytes", "ccs_results_disk_full",
    "ccs_worker_conversions_total", "ccs_worker_peak_rss_bytes", "ccs_worker_kills_total",
    "ccs_in_flight_conversions", "ccs_in_flight_past_p99", "ccs_service_waiting_unserved_tasks",
    "ccs_convert_warm_up", *(f"ccs_convert_warm_{name}" for name in WARM_GAUGES),
    *(f"ccs_convert_warm_{name}_total" for name in WARM_COUNTERS),
    *(f"ccs_dispatcher_{name}_total" for name in DISPATCHER_COUNTERS),
)  # fmt: skip


def task_counts() -> dict[str, dict[str, int]]:
    """Tasks per service name and status key, summed over corpora: one grouped query on the counts table."""
    from corpora.models import TaskCount

    rows = TaskCount.objects.values_list("service__name", "bucket").annotate(total=Sum("count"))
    counts: dict[str, dict[str, int]] = {}
    for service, bucket, total in rows:
        per_status = counts.setdefault(service, dict.fromkeys(STATUS_KEYS, 0))
        per_status[BUCKET_NAMES[bucket]] += int(total or 0)
    return counts


def leases_expired() -> int:
    """Leased tasks whose lease ran out, not yet returned: a range read on the partial index task_leased_until."""
    from corpora.models import Task

    return Task.objects.filter(status__gt=TaskStatus.TODO, leased_until__lt=timezone.now()).count()


def job_counts() -> tuple[dict[str, int], dict[str, int]]:
    """Jobs per state, and per health as the jobs API reports it (ok, stalled, failed): one query."""
    from jobs.choices import ACTIVE_STATES, FAILED_STATES, JobHealth, JobState
    from jobs.models import Job

    stale = timezone.now() - timedelta(seconds=get_config().JOB_STALL_SECONDS)
    failed = Q(state__in=FAILED_STATES)
    stalled = Q(state__in=ACTIVE_STATES) & Q(last_sign__lt=stale)
    rows = (
        Job.objects.annotate(last_sign=Coalesce("heartbeat_at", "created_at"))
        .values("state")
        .annotate(total=Count("pk"), failed=Count("pk", filter=failed), stalled=Count("pk", filter=stalled))
    )
    states = {state.value: 0 for state in JobState}
    health = dict.fromkeys(JobHealth.values, 0)
    for row in rows:
        states[row["state"]] = row["total"]
        health[JobHealth.FAILED] += row["failed"]
        health[JobHealth.STALLED] += row["stalled"]
        health[JobHealth.OK] += row["total"] - row["failed"] - row["stalled"]
    return states, health


def worker_rows() -> list[tuple[str, str, int, int, dict[str, int]]]:
    """(service, identity, conversions, peak resident bytes, kills by every reason) of every worker row, as its
    heartbeats last said: one query."""
    from services.models import Worker
    from services.queries import kills_by_reason

    rows = Worker.objects.order_by("service__name", "identity").values_list(
        "service__name", "identity", "conversions", "peak_rss", "kills"
    )
    return [(service, identity, done, peak, kills_by_reason(kills)) for service, identity, done, peak, kills in rows]


def dispatcher_counters() -> dict[str, int] | None:
    """The counters of the latest dispatcher's row, counted since its process started; None before any ran."""
    from services.models import DispatcherState

    counters: dict[str, int] | None = (
        DispatcherState.objects.order_by("-heartbeat_at").values(*DISPATCHER_COUNTERS).first()
    )
    return counters


def convert_warm_families() -> list[GaugeMetricFamily | CounterMetricFamily]:
    """ccs_convert_warm_up and each warm pool's gauges and counters, as the engine answers its status now (within
    the health check's short timeout, so a hung engine cannot hold a scrape)."""
    pools = convert_engine_status(timeout=CONVERT_ENGINE_TIMEOUT_SECONDS) if settings.CONVERT_WARM else None
    up = GaugeMetricFamily(
        "ccs_convert_warm_up", "1 when the warm engine of /convert answered, 0 otherwise", value=int(pools is not None)
    )
    gauges = {
        name: GaugeMetricFamily(f"ccs_convert_warm_{name}", documentation, labels=["profile"])
        for name, documentation in WARM_GAUGES.items()
    }
    counters = {
        name: CounterMetricFamily(f"ccs_convert_warm_{name}", documentation, labels=["profile"])
        for name, documentation in WARM_COUNTERS.items()
    }
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {**gauges, **counters}
    for pool in pools or []:
        for name, family in families.items():
            family.add_metric([pool["profile"]], pool[name])
    return [up, *gauges.values(), *counters.values()]


def pool_stats() -> tuple[int, int] | None:
    """(connections in use, requests waiting) of this process's pool; None when the pool is off."""
    pool = getattr(connection, "pool", None)
    if pool is None:
        return None
    stats = pool.get_stats()
    return stats.get("pool_size", 0) - stats.get("pool_available", 0), stats.get("requests_waiting", 0)


class DomainCollector(Collector):
    def describe(self) -> list[Metric]:
        return []  # registering must not query: collect() runs at scrape time only

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        tasks = GaugeMetricFamily("ccs_tasks", "Tasks per service and status", labels=["service", "status"])
        backlog = GaugeMetricFamily("ccs_backlog_tasks", "Tasks to convert: todo + queued", labels=["service"])
        leased = GaugeMetricFamily("ccs_leases_in_flight", "Tasks leased to a worker (queued)", labels=["service"])
        for service, per_status in sorted(task_counts().items()):
            for status, count in per_status.items():
                tasks.add_metric([service, status], count)
            backlog.add_metric([service], per_status["todo"] + per_status[BUCKET_NAMES[QUEUED_BUCKET]])
            leased.add_metric([service], per_status[BUCKET_NAMES[QUEUED_BUCKET]])
        yield from (tasks, backlog, leased)
        yield GaugeMetricFamily("ccs_leases_expired", "Leases run out, waiting for the reaper", value=leases_expired())

        states, health = job_counts()
        jobs = GaugeMetricFamily("ccs_jobs", "Jobs per state", labels=["state"])
        for state, count in states.items():
            jobs.add_metric([state], count)
        jobs_health = GaugeMetricFamily("ccs_jobs_health", "Jobs per health (ok, stalled, failed)", labels=["health"])
        for name, count in health.items():
            jobs_health.add_metric([name], count)
        yield from (jobs, jobs_health)

        labels = ["service", "worker"]
        conversions = CounterMetricFamily("ccs_worker_conversions", "Conversions a worker finished", labels=labels)
        peak = GaugeMetricFamily(
            "ccs_worker_peak_rss_bytes", "Largest resident size one of a worker's conversions reached", labels=labels
        )
        kills = CounterMetricFamily(
            "ccs_worker_kills", "A worker's conversions killed, by reason", labels=[*labels, "reason"]
        )
        for service, identity, finished, peak_rss, by_reason in worker_rows():
            conversions.add_metric([service, identity], finished)
            peak.add_metric([service, identity], peak_rss)
            for reason, count in by_reason.items():
                kills.add_metric([service, identity, reason], count)
        yield from (conversions, peak, kills)

        flying = GaugeMetricFamily("ccs_in_flight_conversions", "Conversions in flight", labels=["service"])
        past = GaugeMetricFamily(
            "ccs_in_flight_past_p99", "Conversions in flight past their service's p99 runtime", labels=["service"]
        )
        per_service: dict[str, list[int]] = {}
        for row in in_flight_list():
            counts = per_service.setdefault(row.service, [0, 0])
            counts[0] += 1
            counts[1] += row.past_p99
        for service, (count, past_count) in sorted(per_service.items()):
            flying.add_metric([service], count)
            past.add_metric([service], past_count)
        unserved = GaugeMetricFamily(
            "ccs_service_waiting_unserved_tasks", "Tasks waiting, no live worker serving them", labels=["service"]
        )
        for entry in services_stranded():
            unserved.add_metric([entry["service"]], entry["waiting"])
        yield from (flying, past, unserved)

        yield from convert_warm_families()

        counters = dispatcher_counters()
        if counters is not None:
            for name, documentation in DISPATCHER_COUNTERS.items():
                yield CounterMetricFamily(f"ccs_dispatcher_{name}", documentation, value=counters[name])

        pool = pool_stats()
        if pool is not None:
            yield GaugeMetricFamily("ccs_db_pool_in_use", "Database pool connections in use", value=pool[0])
            yield GaugeMetricFamily("ccs_db_pool_waiting", "Requests waiting for a pool connection", value=pool[1])

        space = results_space()
        if space.free_bytes is not None:
            yield GaugeMetricFamily(
                "ccs_results_disk_free_bytes", "Free bytes on the volume of RESULTS_DIR", value=space.free_bytes
            )
        try:
            held = results_held_read() is not None
        except redis.RedisError:
            held = False  # logged below, where the ingestion counters cannot be read either
        yield GaugeMetricFamily(
            "ccs_results_disk_full",
            "1 while the results disk is below RESULTS_MIN_FREE_MB or the sink holds results back for want of room",
            value=int(space.short or held),
        )

        try:
            ingested, buckets, seconds = ingest_read()
        except redis.RedisError as exc:
            logger.warning("ingestion metrics not readable: %s", exc)
            return
        yield CounterMetricFamily("ccs_results_ingested", "Results ingested by the sink", value=ingested)
        yield HistogramMetricFamily(
            "ccs_ingest_batch_seconds", "Time to apply one batch of results", buckets=buckets, sum_value=seconds
        )


_registered = False
_register_lock = threading.Lock()


def collector_register() -> None:
    """Register the collector with the default registry, once per process."""
    global _registered
    with _register_lock:
        if not _registered:
            REGISTRY.register(DomainCollector())
            _registered = True
