"""corpora's answers to what services tells it (services/signals.py), connected in corpora/apps.py: a service
deleted takes its data in every corpus with it, and a new profile is noted on its open runs."""

from __future__ import annotations

from typing import Any

from config.api.deletions import Deleted
from corpora.pairs import data_purge, runs_profile_note


def service_data_purge(sender: object, *, service_id: int, actor: str, **_: Any) -> Deleted:
    """Delete the service's tasks, messages, result archives and activations in every corpus
    (corpora.pairs.data_purge); its workers and the service itself are services.actions.service_delete's."""
    return data_purge(service_id=service_id, actor=actor)


def service_profile_note(sender: object, *, service_id: int, profile_hash: str, **_: Any) -> int:
    """Note the service's new profile on its open runs (corpora.pairs.runs_profile_note)."""
    return runs_profile_note(service_id=service_id, profile_hash=profile_hash)
