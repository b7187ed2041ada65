from __future__ import annotations

from django.core.management.base import CommandParser

from corpora.actions.corpora import service_activate
from jobs.cli import ServiceCommand


class Command(ServiceCommand):
    help = "Activate a service on a corpus: one TODO task per valid document (runs the job here)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("corpus")
        parser.add_argument("service")

    def handle(self, *args: object, corpus: str, service: str, **options: object) -> None:
        job = self.write_action(
            lambda: service_activate(corpus_name=corpus, service_name=service, actor=self.actor, send=False)
        )
        self.run_job(job)
