"""The vocabularies of services, each spelled here once: the protected services that every corpus has, with
their descriptions as labels (a migration creates both; they cannot be deleted or leased from)."""

from __future__ import annotations

from django.db import models


class ProtectedService(models.TextChoices):
    INIT = "init", "Infrastructure: the initial state of every document."
    IMPORT = "import", "Infrastructure: one task per imported document (no_problem, or invalid with why)."
