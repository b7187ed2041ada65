"""The vocabularies of runs, each spelled here once: how a message class changed between two snapshots, and
whether a document gained or lost a class."""

from __future__ import annotations

from django.db import models


class ClassChange(models.TextChoices):
    """How a class's task count moved between the previous snapshot (p) and the current one (c): four kinds
    of one class, and two filters that take two kinds each (more tasks now, or fewer)."""

    APPEARED = "appeared"
    VANISHED = "vanished"
    GREW = "grew"
    SHRANK = "shrank"
    INCREASED = "increased"
    DECREASED = "decreased"


class MemberChange(models.TextChoices):
    """A document that has a class now and did not before (gained), or the reverse (lost)."""

    GAINED = "gained"
    LOST = "lost"
