"""The vocabularies of the services app, spelled here once."""

from __future__ import annotations

# Why a worker's conversions were killed, as its heartbeats count them (services.models.Worker.kills): past the
# timeout, the memory limit, the process limit or the disk limit, or stopped by the worker's memory governor
# when its machine ran low. A reason missing from a row's counts means none.
KILL_REASONS: tuple[str, ...] = ("timeout", "memory", "processes", "disk", "governor")
