"""Runs: one conversion campaign of a service over a corpus. At most one is open per pair."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class Run(models.Model):
    corpus = models.ForeignKey("corpora.Corpus", on_delete=models.DO_NOTHING, related_name="runs")
    service = models.ForeignKey("services.Service", on_delete=models.DO_NOTHING, related_name="runs")
    owner = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["corpus", "service"], name="run_one_open_per_pair", condition=Q(finished_at__isnull=True)
            )
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.service_id} on {self.corpus_id}"
