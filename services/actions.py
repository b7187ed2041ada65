"""Writes on services, each journaled: register, delete (with all their tasks and messages), lease override."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from accounts.actions import journaled
from accounts.journal import Action
from config.errors import BadRequest, Conflict, Forbidden
from config.names import name_check
from corpora.pairs import data_purge
from services.models import Service
from services.queries import service_get

PROTECTED_DESCRIPTIONS = {
    "init": "Infrastructure: the initial state of every document.",
    "import": "Infrastructure: one task per imported document (no_problem, or invalid with why).",
}


def protected_service(name: str) -> Service:
    """The init or import service, recreated if it went missing (a migration creates both)."""
    service, _ = Service.objects.get_or_create(
        name=name,
        defaults={"description": PROTECTED_DESCRIPTIONS[name], "version": "1", "outputformat": "tex"},
    )
    return service


@journaled(Action.SERVICE_REGISTER, target="{name}")
def service_register(*, name: str, actor: str, **fields: Any) -> Service:
    """Define a service; it creates no tasks until activated on a corpus."""
    name_check(name)
    if fields.get("lease_seconds") is not None and fields["lease_seconds"] <= 0:
        raise BadRequest("lease_seconds must be a positive number of seconds, or null.")
    try:
        with transaction.atomic():
            service = Service.objects.create(name=name, **{k: v for k, v in fields.items() if v is not None})
    except IntegrityError as exc:
        raise Conflict(f"A service named {name!r} exists already.") from exc
    return service_get(service.name)


@journaled(Action.SERVICE_DELETE, target="{name}")
def service_delete(*, name: str, confirm: str | None, actor: str) -> dict[str, Any]:
    """Delete a service and every task, message and result archive of it in every corpus (set-based)."""
    service = service_get(name)
    if service.is_protected:
        raise Forbidden(f"{name!r} is a protected infrastructure service and cannot be deleted.")
    if confirm != name:
        raise BadRequest(f"Pass confirm={name} to delete the service {name!r} and all its results.")
    return data_purge(service_id=service.pk, actor=actor)


@journaled(Action.SERVICE_LEASE, target="{name}")
def service_lease_set(*, name: str, seconds: int | None, actor: str) -> Service:
    """Set or clear the lease override; tasks already leased keep the lease they were given."""
    service = service_get(name)
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0):
        raise BadRequest("seconds must be a positive whole number of seconds, or null to clear the override.")
    Service.objects.filter(pk=service.pk).update(lease_seconds=seconds)
    return service_get(name)
