from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from jobs.cli import ServiceCommand
from services.actions import service_delete


class Command(ServiceCommand):
    help = "Delete a service with all its tasks and messages in every corpus (--confirm NAME)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--confirm", help="must equal the service name")

    def handle(self, *args: object, name: str, confirm: str | None, **options: Any) -> None:
        counts = self.write_action(lambda: service_delete(name=name, confirm=confirm, actor=self.actor))
        self.stdout.write(f"deleted service {name}: {counts}")
