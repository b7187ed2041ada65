"""What services tell the apps above them, which services does not import: the conversion domain (corpora)
keeps a service's tasks, messages, results and runs, and connects its receivers in its AppConfig.ready
(corpora/apps.py)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside service_delete's transaction, before the service's own rows go: a receiver deletes what of
# its data names the service (service_id, actor) and returns its counts, which the deletion answers with.
service_deleting = Signal()

# Sent when a service's profile changes (service_id, profile_hash): a receiver returns how many open runs
# noted the new profile, which the journal entry records.
service_profile_changed = Signal()
