"""Writes on services, each journaled: register, delete (with all their tasks and messages), lease override,
converter profile."""

# ruff: noqa: S608  (statements are fixed text and table names of the models; values are parameters)

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from accounts.actions import journal_note, journaled
from accounts.choices import Action
from config.api.deletions import Deleted
from config.errors import BadRequest, Conflict, Forbidden
from config.names import name_check
from conversion.profiles import Profile, ProfileInvalid, profile_parse
from services.choices import ProtectedService
from services.models import DispatcherState, InFlight, Service, Worker
from services.queries import service_get
from services.signals import service_deleting, service_profile_changed

IN_FLIGHT_TABLE = InFlight._meta.db_table
WORKER_TABLE = Worker._meta.db_table


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
def service_delete(*, name: str, confirm: str | None, actor: str) -> Deleted:
    """Delete a service and every task, message and result archive of it in every corpus (set-based)."""
    service = service_get(name)
    if service.is_protected:
        raise Forbidden(f"{name!r} is a protected infrastructure service and cannot be deleted.")
    if confirm != name:
        raise BadRequest(f"Pass confirm={name} to delete the service {name!r} and all its results.")
    with transaction.atomic():
        deleted = Deleted(messages=0, tasks=0, result_files=0)
        # django-stubs types a receiver's answer as str | None; corpora.receivers.service_data_purge answers
        # what it deleted.
        for _receiver, answer in service_deleting.send(sender=Service, service_id=service.pk, actor=actor):
            deleted = cast("Deleted", answer)
        # The service's own rows go last, once nothing of corpora points at it.
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {WORKER_TABLE} WHERE service_id = %s", [service.pk])
            cursor.execute(f"DELETE FROM {Service._meta.db_table} WHERE id = %s", [service.pk])
    return deleted


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
    answers = service_profile_changed.send(sender=Service, service_id=service.pk, profile_hash=checked.digest)
    # corpora.receivers.service_profile_note answers the open runs it noted (django-stubs says str | None).
    runs = sum(cast("int", answer) for _receiver, answer in answers)
    journal_note(profile_hash=checked.digest, open_runs_noted=runs)
    return service_get(name)


def in_flight_replace(rows: list[tuple[object, ...]]) -> None:
    """Make the in-flight table what the dispatcher holds now (`rows`: task id, service id, corpus, document,
    worker, thread, since, heartbeat time, timeout seconds, p99 ms), in two statements: the rows of tasks no
    longer held go, the others are written."""
    with transaction.atomic(), connection.cursor() as cursor:
        columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(10)]
        cursor.execute(f"DELETE FROM {IN_FLIGHT_TABLE} WHERE task_id <> ALL(%s::bigint[])", [columns[0]])
        if not rows:
            return
        cursor.execute(
            f"""
            INSERT INTO {IN_FLIGHT_TABLE} (task_id, service_id, corpus, document, worker, thread, since,
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


# --- the dispatcher's records: its state row and the workers' tallies ------------------------------


def dispatcher_state_start(*, pid: int) -> DispatcherState:
    """The state row of a dispatcher that starts: a new row, and the rows of earlier dispatchers go."""
    state = DispatcherState.objects.create(started_at=timezone.now(), heartbeat_at=timezone.now(), pid=pid)
    DispatcherState.objects.exclude(pk=state.pk).delete()
    return state


def dispatcher_state_beat(state_id: int, **counters: int) -> None:
    """The dispatcher's heartbeat on its state row, with its counters."""
    DispatcherState.objects.filter(pk=state_id).update(heartbeat_at=timezone.now(), **counters)


def workers_tally_add(
    *,
    identities: list[str],
    service_ids: list[int],
    dispatched: list[int],
    returned: list[int],
    first_seen: list[datetime],
    last_seen: list[datetime],
) -> None:
    """Add the tasks the dispatcher handed out to and got back from each (worker, service) since its last
    flush, in one upsert."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {WORKER_TABLE} (identity, service_id, dispatched, returned, first_seen, last_seen)
            SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[],
                                 %s::timestamptz[], %s::timestamptz[])
            ON CONFLICT (identity, service_id) DO UPDATE
               SET dispatched = {WORKER_TABLE}.dispatched + EXCLUDED.dispatched,
                   returned = {WORKER_TABLE}.returned + EXCLUDED.returned,
                   last_seen = GREATEST({WORKER_TABLE}.last_seen, EXCLUDED.last_seen)
            """,
            [identities, service_ids, dispatched, returned, first_seen, last_seen],
        )


def workers_heartbeat(
    *,
    identities: list[str],
    service_ids: list[int],
    conversions: list[int],
    peaks: list[int],
    kills: list[Any],
    times: list[datetime],
    engines: list[str],
    engine_versions: list[str | None],
) -> None:
    """Write what the workers' heartbeats reported (one upsert): per (worker, service), the tallies counted
    since the worker's process started, with the engine of the service's profile and its version."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {WORKER_TABLE} (identity, service_id, conversions, peak_rss, kills, heartbeat_at,
                                         engine, engine_version, dispatched, returned, first_seen, last_seen)
            SELECT v.identity, v.service_id, v.conversions, v.peak_rss, v.kills, v.at, v.engine, v.version,
                   0, 0, v.at, v.at
              FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[], %s::jsonb[], %s::timestamptz[],
                          %s::text[], %s::text[])
                   AS v(identity, service_id, conversions, peak_rss, kills, at, engine, version)
            ON CONFLICT (identity, service_id) DO UPDATE
               SET conversions = EXCLUDED.conversions, peak_rss = EXCLUDED.peak_rss, kills = EXCLUDED.kills,
                   heartbeat_at = EXCLUDED.heartbeat_at, engine = EXCLUDED.engine,
                   engine_version = EXCLUDED.engine_version
            """,
            [identities, service_ids, conversions, peaks, [Jsonb(value) for value in kills], times, engines,
             engine_versions],
        )  # fmt: skip
