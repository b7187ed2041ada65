"""The Job row: the source of truth for every background job."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from jobs.choices import ACTIVE_STATES, JobState


class Job(models.Model):
    uuid = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED)
    actor = models.CharField(max_length=100)
    params = models.JSONField(default=dict, blank=True)
    progress_current = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(null=True, blank=True)
    message = models.CharField(max_length=500, blank=True)
    result = models.JSONField(null=True, blank=True)
    log = models.JSONField(default=list, blank=True)
    # Set for debounced kinds while the job is active; a partial unique index admits one at a time.
    debounce_key = models.CharField(max_length=64, null=True, blank=True)
    # host:pid:process-start of the process running the job, to tell a dead worker from a slow one.
    worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["-created_at"], name="job_created"),
            models.Index(
                fields=["-created_at"],
                name="job_active_created",
                condition=Q(state__in=list(ACTIVE_STATES)),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["debounce_key"],
                name="job_one_active_per_debounce_key",
                condition=Q(state__in=list(ACTIVE_STATES)) & Q(debounce_key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.uuid} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES
