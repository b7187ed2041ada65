from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from jobs.cli import ServiceCommand
from services.actions import service_lease_set


class Command(ServiceCommand):
    help = "Set a service's lease override in seconds, or clear it with 'none'."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("service")
        parser.add_argument("seconds", help="positive whole seconds, or none")

    def handle(self, *args: object, service: str, seconds: str, **options: Any) -> None:
        if seconds.lower() == "none":
            value = None
        elif seconds.isdigit():
            value = int(seconds)
        else:
            raise CommandError("seconds must be a positive whole number, or none to clear the override")
        updated = self.write_action(lambda: service_lease_set(name=service, seconds=value, actor=self.actor))
        self.stdout.write(f"{updated.name}: lease {updated.lease_seconds or 'default'}")
