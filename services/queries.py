"""Reads of services, shared by the API, the screens and the commands."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, QuerySet

from config.errors import NotFound
from conversion.engine import KILL_REASONS
from conversion.sandbox import Sandbox
from services.models import PROTECTED_SERVICES, InFlight, Service, Worker


def service_list() -> QuerySet[Service]:
    return Service.objects.annotate(corpus_count=Count("activations")).order_by("name")


def converter_names() -> list[str]:
    """The names of every service that converts (all but the protected infrastructure ones), by name."""
    return list(Service.objects.exclude(name__in=PROTECTED_SERVICES).order_by("name").values_list("name", flat=True))


def service_get(name: str) -> Service:
    try:
        return service_list().get(name=name)
    except Service.DoesNotExist as exc:
        raise NotFound(f"No service named {name!r}.") from exc


def effective_lease_seconds(service: Service) -> int:
    """The lease a task of this service gets when leased now: the override or the global default."""
    return service.lease_seconds or settings.DISPATCHER_LEASE_SECONDS


def conversion_sandbox() -> Sandbox:
    """The sandbox latexmlc runs in here, as the settings say (CONVERSION_SANDBOX, CONVERSION_BWRAP)."""
    return Sandbox(mode=settings.CONVERSION_SANDBOX, bwrap=settings.CONVERSION_BWRAP)


def worker_list(service_name: str) -> list:
    """The workers that have asked for work of a service, most recently seen first, with their service in the
    same query (what the records show of it)."""
    service = service_get(service_name)
    return list(Worker.objects.filter(service=service).select_related("service").order_by("-last_seen", "identity"))


def kills_by_reason(kills: object) -> dict[str, int]:
    """A worker's kill counts with every reason present: a reason its heartbeats never named is 0, and so is a
    count that is not a whole number of at least 0."""
    given = kills if isinstance(kills, dict) else {}
    counts = {}
    for reason in KILL_REASONS:
        value = given.get(reason)
        counts[reason] = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return counts


def in_flight_held() -> list[InFlight]:
    """Every conversion in flight as the dispatcher last wrote it: what a dispatcher starting again holds."""
    return list(InFlight.objects.all())


def in_flight_list(service_name: str | None = None) -> list[InFlight]:
    """The conversions in flight (of one service, or all), longest running first."""
    rows = InFlight.objects.order_by("since", "task_id")
    if service_name is not None:
        rows = rows.filter(service=service_get(service_name))
    return list(rows)
