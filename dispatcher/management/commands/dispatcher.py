from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dispatcher.server import SinkFailed, dispatcher_serve


class Command(BaseCommand):
    help = "Run the ZeroMQ dispatcher (ventilator and sink ports from the settings) until SIGTERM."

    def handle(self, *args: object, **options: Any) -> None:
        import zmq

        try:
            dispatcher_serve()
        except zmq.ZMQError as exc:
            raise CommandError(f"the dispatcher cannot bind its ports: {exc}") from exc
        except SinkFailed as exc:
            raise CommandError(f"the dispatcher stopped: {exc}") from exc
