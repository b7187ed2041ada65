"""Reads of services, shared by the API, the screens and the commands."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from config.errors import NotFound
from config.live import get_config
from conversion import warm
from conversion.choices import KillReason
from conversion.sandbox import Sandbox
from services.choices import ProtectedService
from services.models import InFlight, Service, Worker
from services.records import InFlightRecord

# A worker that sends no heartbeat counts as live this long after it was last handed a task or returned one.
WORKER_SEEN_MINUTES = 5


def service_list() -> QuerySet[Service]:
    return Service.objects.annotate(corpus_count=Count("activations")).order_by("name")


def converter_names() -> list[str]:
    """The names of every service that converts (all but the protected infrastructure ones), by name."""
    return list(
        Service.objects.exclude(name__in=ProtectedService.values).order_by("name").values_list("name", flat=True)
    )


def service_get(name: str) -> Service:
    try:
        return service_list().get(name=name)
    except Service.DoesNotExist as exc:
        raise NotFound(f"No service named {name!r}.") from exc


def effective_lease_seconds(service: Service) -> int:
    """The lease a task of this service gets when leased now: the override or the global default."""
    return service.lease_seconds or get_config().DISPATCHER_LEASE_SECONDS


def convert_engine_socket() -> Path:
    """Where the warm engine of /convert (`manage.py convert_engine`) answers: a Unix socket
    (CONVERT_ENGINE_SOCKET, under VAR_DIR unless set)."""
    return Path(settings.CONVERT_ENGINE_SOCKET)


def convert_engine_status(*, timeout: float = 2.0) -> list[dict[str, Any]] | None:
    """The warm engine's pools as it reports them (conversion.warm.WarmPool.status), or None when it does not
    answer."""
    try:
        pools: list[dict[str, Any]] = warm.request(convert_engine_socket(), {"op": "status"}, timeout=timeout)["pools"]
        return pools
    except (warm.WarmUnavailable, ValueError, KeyError):
        return None


def conversion_sandbox() -> Sandbox:
    """The sandbox latexmlc runs in here, as the settings say (CONVERSION_SANDBOX, CONVERSION_BWRAP,
    CONVERSION_SANDBOX_PROC)."""
    return Sandbox(
        mode=settings.CONVERSION_SANDBOX, bwrap=settings.CONVERSION_BWRAP, proc=settings.CONVERSION_SANDBOX_PROC
    )


def worker_list(service_name: str) -> list[Worker]:
    """The workers that have asked for work of a service, most recently seen first, with their service in the
    same query (what the records show of it), each with `converting`: its conversions in flight
    (`in_flight_record`s), in one more read."""
    service = service_get(service_name)
    workers = list(Worker.objects.filter(service=service).select_related("service").order_by("-last_seen", "identity"))
    flying: dict[str, list[InFlightRecord]] = defaultdict(list)
    now = timezone.now()
    for row in InFlight.objects.filter(service=service).order_by("since", "task_id"):
        flying[row.thread].append(in_flight_record(row, now))
    for worker in workers:
        worker.converting = flying.get(worker.identity, [])
    return workers


def worker_live_since(now: datetime | None = None) -> tuple[datetime, datetime]:
    """A worker is live when its last heartbeat is newer than the first time (two silences: the dispatcher
    gives a silent worker's leases back after one), or, sending none (a CorTeX worker), it was last handed
    a task or returned one after the second."""
    now = now or timezone.now()
    return (
        now - timedelta(seconds=2 * get_config().DISPATCHER_WORKER_SILENCE_SECONDS),
        now - timedelta(minutes=WORKER_SEEN_MINUTES),
    )


def served_service_ids(now: datetime | None = None) -> set[int]:
    """The services at least one live worker serves (`worker_live_since`)."""
    heard, seen = worker_live_since(now)
    live = Worker.objects.filter(Q(heartbeat_at__gte=heard) | Q(heartbeat_at__isnull=True, last_seen__gte=seen))
    return set(live.values_list("service_id", flat=True).distinct())


def kills_by_reason(kills: object) -> dict[str, int]:
    """A worker's kill counts with every reason present: a reason its heartbeats never named is 0, and so is a
    count that is not a whole number of at least 0."""
    given = kills if isinstance(kills, dict) else {}
    counts = {}
    for reason in KillReason:
        value = given.get(reason.value)
        counts[reason.value] = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return counts


def in_flight_held() -> list[InFlight]:
    """Every conversion in flight as the dispatcher last wrote it: what a dispatcher starting again holds."""
    return list(InFlight.objects.all())


def in_flight_record(row: InFlight, now: datetime) -> InFlightRecord:
    """One conversion in flight: its document, worker, how long it has run, the share of its timeout that is,
    and whether it runs past its service's 99th percentile."""
    elapsed = max((now - row.since).total_seconds(), 0.0)
    return InFlightRecord(
        task=row.task_id,
        corpus=row.corpus,
        document=row.document,
        service_id=row.service_id,
        worker=row.thread,
        since=row.since,
        heartbeat_at=row.heartbeat_at,
        elapsed_seconds=round(elapsed, 1),
        timeout_seconds=row.timeout_seconds,
        timeout_share=round(elapsed / row.timeout_seconds, 3) if row.timeout_seconds else None,
        p99_ms=row.p99_ms,
        past_p99=row.p99_ms is not None and elapsed * 1000 > row.p99_ms,
    )


def in_flight_list(service_name: str | None = None) -> list[InFlightRecord]:
    """The conversions in flight (of one service, or all), longest running first, with their service's name."""
    rows = InFlight.objects.order_by("since", "task_id")
    if service_name is not None:
        rows = rows.filter(service=service_get(service_name))
    names = dict(Service.objects.values_list("id", "name"))
    now = timezone.now()
    return [replace(in_flight_record(row, now), service=names.get(row.service_id, "")) for row in rows]
