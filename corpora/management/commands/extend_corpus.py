from __future__ import annotations

from django.core.management.base import CommandParser

from corpora.actions.corpora import corpus_extend
from jobs.cli import ServiceCommand


class Command(ServiceCommand):
    help = "Add the entries that arrived in a corpus directory since its import (runs the job here)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: object, name: str, **options: object) -> None:
        job = self.write_action(lambda: corpus_extend(name=name, actor=self.actor, send=False))
        self.run_job(job)
