from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.actions import screen_session_revoke
from accounts.cli import cli_actor
from accounts.queries import screen_session_list
from config.errors import ServiceError


class Command(BaseCommand):
    help = "Revoke a signed-in screen session by its id (it ends at once); --list shows the active sessions."

    def add_arguments(self, parser: CommandParser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("id", nargs="?", type=int, help="the session's id (as GET /api/sessions lists it)")
        group.add_argument("--list", action="store_true", help="list active sessions (id, actor, address, times)")

    def handle(self, *args: object, **options: Any) -> None:
        if options["list"]:
            for session in screen_session_list():
                self.stdout.write(
                    f"{session.pk}\t{session.actor}\t{session.client_address}"
                    f"\tstarted {session.started_at.isoformat()}\tseen {session.last_seen_at.isoformat()}"
                )
            return
        session_id = options["id"]
        try:
            session = screen_session_revoke(session_id, actor=cli_actor())
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"revoked session {session.pk} of {session.actor}")
