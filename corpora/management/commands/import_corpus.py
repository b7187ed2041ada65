from __future__ import annotations

from django.core.management.base import CommandParser

from corpora.actions.corpora import corpus_import
from jobs.cli import ServiceCommand


class Command(ServiceCommand):
    help = "Import a corpus from a directory inside the corpus roots (runs the import job here)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("path")
        parser.add_argument("--description", default="")

    def handle(self, *args: object, name: str, path: str, description: str, **options: object) -> None:
        job = self.write_action(
            lambda: corpus_import(name=name, path=path, description=description, actor=self.actor, send=False)
        )
        self.run_job(job)
