"""The vocabularies of reports, each spelled here once: what a run control does to a pair's (or every pair's)
conversions."""

from __future__ import annotations

from django.db import models


class RunControlAction(models.TextChoices):
    """Pause blocks every task in progress; resume puts the blocked ones back to TODO."""

    PAUSE = "pause"
    RESUME = "resume"
