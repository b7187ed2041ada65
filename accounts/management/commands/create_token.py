from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.actions import token_create
from accounts.cli import cli_actor
from config.errors import ServiceError


class Command(BaseCommand):
    help = "Issue a service token for ACTOR and print it (the token alone on stdout)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("actor", help="who the token acts for, e.g. alice or ingest-bot")
        parser.add_argument("--staff", action="store_true", help="also admit ACTOR to the admin-only screens")

    def handle(self, *args: object, actor: str, staff: bool, **options: Any) -> None:
        try:
            _, raw = token_create(actor=actor, created_by=cli_actor(), staff=staff)
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(raw)
