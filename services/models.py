"""Services (registered converters). `init` and `import` are protected infrastructure services."""

from __future__ import annotations

from typing import Any

from django.db import models

from conversion.profiles import DEFAULT as DEFAULT_PROFILE
from services.choices import ProtectedService
from services.records import InFlightRecord


def default_profile() -> dict[str, Any]:
    """The default converter profile (conversion.profiles): today's latexmlc command line."""
    return DEFAULT_PROFILE.as_json()


class Service(models.Model):
    name = models.CharField(max_length=100, unique=True)
    version = models.CharField(max_length=50, default="0.1")
    inputformat = models.CharField(max_length=20, default="tex")
    outputformat = models.CharField(max_length=20, default="html")
    command = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    # Visibility timeout override; null falls back to the global dispatcher lease.
    lease_seconds = models.PositiveIntegerField(null=True, blank=True)
    # How its papers are converted (conversion.profiles.Profile.as_json), checked when it was written.
    profile = models.JSONField(
        default=default_profile, db_default=models.Value(default_profile(), output_field=models.JSONField())
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_protected(self) -> bool:
        return self.name in ProtectedService.values


class Worker(models.Model):
    """Tallies of one worker identity for one service, written by the dispatcher."""

    identity = models.CharField(max_length=200)
    service = models.ForeignKey(Service, on_delete=models.CASCADE, related_name="workers")
    # Not a column: its conversions in flight, as services.queries.worker_list reads them.
    converting: list[InFlightRecord]
    dispatched = models.BigIntegerField(default=0)
    returned = models.BigIntegerField(default=0)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    # From the worker's heartbeats (conversion.worker), as it last reported them, counted since its process
    # started: conversions finished, the largest resident size one of them reached (bytes), and the
    # conversions killed, by reason (timeout, memory, processes, disk, governor). A worker that sends no
    # heartbeat (an unmodified CorTeX worker) leaves them at zero and heartbeat_at empty.
    conversions = models.BigIntegerField(default=0, db_default=0)
    peak_rss = models.BigIntegerField(default=0, db_default=0)
    kills = models.JSONField(default=dict, db_default=models.Value({}, output_field=models.JSONField()))
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # From the heartbeats too: the engine of the service's profile, and the version this worker's copy of it
    # reported (`latexmlc (LaTeXML version 0.8.7)`); empty before the worker has run that engine.
    engine = models.CharField(max_length=1024, null=True, blank=True)
    engine_version = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        ordering = ["identity"]
        constraints = [models.UniqueConstraint(fields=["identity", "service"], name="worker_unique_identity_service")]

    def __str__(self) -> str:
        return f"{self.identity} ({self.service_id})"

    @property
    def in_flight(self) -> int:
        return max(self.dispatched - self.returned, 0)


class DispatcherState(models.Model):
    """One row: the dispatcher's liveness and its running counters (for health, status and tests)."""

    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    pid = models.IntegerField()
    leased = models.BigIntegerField(default=0)
    dispatched = models.BigIntegerField(default=0)
    ingested = models.BigIntegerField(default=0)
    discarded = models.BigIntegerField(default=0)
    garbage = models.BigIntegerField(default=0)
    reaped = models.BigIntegerField(default=0)
    failed_for_retries = models.BigIntegerField(default=0)
    # Leases given back because their worker's heartbeats stopped, and results a worker's memory governor
    # sent back for another attempt.
    released = models.BigIntegerField(default=0, db_default=0)
    retried = models.BigIntegerField(default=0, db_default=0)

    def __str__(self) -> str:
        return f"dispatcher pid {self.pid}"


class InFlight(models.Model):
    """A task a worker converts now, as the dispatcher last heard it (written by the dispatcher once a second
    when it changed). It outlives a dispatcher restart: the next dispatcher knows whose leases are held and
    since when each holder was last heard, so the leases of a worker that died with it come back."""

    # The task's id: no database-level foreign key, like the tasks' own (corpora.models.Task).
    task_id = models.BigIntegerField(primary_key=True)
    service = models.ForeignKey(Service, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    # The task's corpus and document by name, as the dispatcher read them when the worker took it: the
    # screens of this app show them without reading the corpora's tables.
    corpus = models.CharField(max_length=200)
    document = models.TextField()
    worker = models.CharField(max_length=200)  # the worker process, as its heartbeats name it
    thread = models.CharField(max_length=200)  # the worker thread (Worker.identity) converting it
    since = models.DateTimeField()  # when the worker took the task
    heartbeat_at = models.DateTimeField()  # the worker's last heartbeat
    timeout_seconds = models.FloatField(null=True)  # its conversion's timeout, as the worker reported it
    # The service's 99th percentile runtime when the dispatcher last looked (corpora.queries.reports): a conversion
    # running longer is flagged on the screens.
    p99_ms = models.IntegerField(null=True)

    class Meta:
        ordering = ["since"]

    def __str__(self) -> str:
        return f"task {self.task_id} on {self.thread}"
