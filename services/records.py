"""The typed records services' queries return (services.queries), which its models name too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class InFlightRecord:
    """One conversion in flight as the screens and the API show it (services.serializers.InFlightSerializer);
    `service` is its service's name, given by in_flight_list."""

    task: int
    corpus: str
    document: str
    service_id: int
    worker: str
    since: datetime
    heartbeat_at: datetime
    elapsed_seconds: float
    timeout_seconds: float | None
    timeout_share: float | None
    p99_ms: int | None
    past_p99: bool
    service: str = ""
