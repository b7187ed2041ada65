from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.actions import token_revoke
from accounts.cli import cli_actor
from accounts.queries import token_list
from config.errors import ServiceError


class Command(BaseCommand):
    help = "Revoke service tokens: all of an actor's (--actor), or one by its prefix (--prefix); --list shows them."

    def add_arguments(self, parser: CommandParser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--actor", help="revoke every active token of this actor")
        group.add_argument("--prefix", help="revoke the token starting with this prefix (first 12 characters)")
        group.add_argument("--list", action="store_true", help="list active tokens (actor, prefix, last use)")

    def handle(self, *args: object, **options: Any) -> None:
        if options["list"]:
            for token in token_list():
                used = token.last_used_at.isoformat() if token.last_used_at else "never"
                self.stdout.write(f"{token.actor}\t{token.prefix}\tcreated {token.created_at:%Y-%m-%d}\tused {used}")
            return
        try:
            count = token_revoke(revoked_by=cli_actor(), actor=options["actor"], prefix=options["prefix"])
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"revoked {count} token(s)")
