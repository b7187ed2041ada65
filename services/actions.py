"""Writes on services, each journaled: register, delete (with all their tasks and messages), lease override,
converter profile."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from accounts.actions import journal_note, journaled
from accounts.choices import Action
from config.errors import BadRequest, Conflict, Forbidden
from config.names import name_check
from conversion.profiles import Profile, ProfileInvalid, profile_parse
from corpora.pairs import data_purge, runs_profile_note
from services.choices import ProtectedService
from services.models import Service
from services.queries import service_get


def protected_service(name: str) -> Service:
    """The init or import service, recreated if it went missing (a migration creates both)."""
    service, _ = Service.objects.get_or_create(
        name=name,
        defaults={"description": ProtectedService(name).label, "version": "1", "outputformat": "tex"},
    )
    return service


@journaled(Action.SERVICE_REGISTER, target="{name}")
def service_register(*, name: str, actor: str, **fields: Any) -> Service:
    """Define a service; it creates no tasks until activated on a corpus. Its `profile` is a preset's name
    or an object of options (conversion.profiles), the default preset without one."""
    name_check(name)
    if fields.get("lease_seconds") is not None and fields["lease_seconds"] <= 0:
        raise BadRequest("lease_seconds must be a positive number of seconds, or null.")
    given = fields.pop("profile", None)
    profile = profile_checked("default" if given is None else given, field="profile")
    try:
        with transaction.atomic():
            service = Service.objects.create(
                name=name, profile=profile.as_json(), **{k: v for k, v in fields.items() if v is not None}
            )
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


def profile_checked(data: object, *, field: str | None = None) -> Profile:
    """A profile from its JSON form, checked as the workers check it, against PROFILE_ROOTS; BadRequest
    naming each bad option (under `field` when the profile is a field of the body)."""
    try:
        return profile_parse(data, roots=settings.PROFILE_ROOTS)
    except ProfileInvalid as exc:
        errors: dict[str, Any] = exc.errors if field is None else {field: exc.errors}
        raise BadRequest(f"The profile has invalid options: {exc}", errors=errors) from None


@journaled(Action.SERVICE_PROFILE, target="{name}")
def service_profile_set(*, name: str, actor: str, **profile: Any) -> Service:
    """Give a service a converter profile: the options given over their `preset` (the default preset
    without one). Tasks are handed out with it from the dispatcher's next reading of the services (within
    a second or two); a conversion under way keeps the profile it started with, and the service's open runs
    note the new profile's hash."""
    service = service_get(name)
    if service.is_protected:
        raise Forbidden(f"{name!r} is a protected infrastructure service: it converts nothing.")
    checked = profile_checked(profile)
    Service.objects.filter(pk=service.pk).update(profile=checked.as_json())
    runs = runs_profile_note(service_id=service.pk, profile_hash=checked.digest)
    journal_note(profile_hash=checked.digest, open_runs_noted=runs)
    return service_get(name)


def in_flight_replace(rows: list[tuple]) -> None:
    """Make the in-flight table what the dispatcher holds now (`rows`: task id, service id, corpus, document,
    worker, thread, since, heartbeat time, timeout seconds, p99 ms), in two statements: the rows of tasks no
    longer held go, the others are written."""
    with transaction.atomic(), connection.cursor() as cursor:
        columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(10)]
        cursor.execute("DELETE FROM services_inflight WHERE task_id <> ALL(%s::bigint[])", [columns[0]])
        if not rows:
            return
        cursor.execute(
            """
            INSERT INTO services_inflight (task_id, service_id, corpus, document, worker, thread, since,
                                           heartbeat_at, timeout_seconds, p99_ms)
            SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],
                                 %s::timestamptz[], %s::timestamptz[], %s::float8[], %s::int[])
            ON CONFLICT (task_id) DO UPDATE
               SET worker = EXCLUDED.worker, thread = EXCLUDED.thread, since = EXCLUDED.since,
                   heartbeat_at = EXCLUDED.heartbeat_at, timeout_seconds = EXCLUDED.timeout_seconds,
                   p99_ms = EXCLUDED.p99_ms
            """,
            columns,
        )
