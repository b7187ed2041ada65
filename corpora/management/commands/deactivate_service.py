from __future__ import annotations

from django.core.management.base import CommandParser

from corpora.actions.corpora import service_deactivate
from jobs.cli import ServiceCommand


class Command(ServiceCommand):
    help = "Deactivate a service on a corpus: delete that pair's tasks and messages (--confirm SERVICE)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("corpus")
        parser.add_argument("service")
        parser.add_argument("--confirm", help="must equal the service name")

    def handle(self, *args: object, corpus: str, service: str, confirm: str | None, **options: object) -> None:
        deleted = self.write_action(
            lambda: service_deactivate(corpus_name=corpus, service_name=service, confirm=confirm, actor=self.actor)
        )
        self.stdout.write(f"deactivated {service} on {corpus}: {deleted.counts()}")
