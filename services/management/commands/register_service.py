from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from jobs.cli import ServiceCommand
from services.actions import service_register


class Command(ServiceCommand):
    help = "Register a service (a converter); it creates no tasks until activated on a corpus."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--service-version", help="the converter's version")
        parser.add_argument("--command", dest="service_command", help="the converter's command line")
        parser.add_argument("--description")
        parser.add_argument("--lease-seconds", type=int)
        parser.add_argument("--profile", help="its converter profile: a preset (default, arxiv)")

    def handle(self, *args: object, name: str, **options: Any) -> None:
        fields = {
            "version": options["service_version"],
            "command": options["service_command"],
            "description": options["description"],
            "lease_seconds": options["lease_seconds"],
            "profile": options["profile"],
        }
        service = self.write_action(lambda: service_register(name=name, actor=self.actor, **fields))
        self.stdout.write(f"registered service {service.name}")
