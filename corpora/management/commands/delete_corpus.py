from __future__ import annotations

from django.core.management.base import CommandParser

from corpora.actions.corpora import corpus_delete
from jobs.cli import ServiceCommand


class Command(ServiceCommand):
    help = "Delete a corpus with all its documents, tasks and log messages (--confirm NAME)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--confirm", help="must equal the corpus name")

    def handle(self, *args: object, name: str, confirm: str | None, **options: object) -> None:
        counts = self.write_action(lambda: corpus_delete(name=name, confirm=confirm, actor=self.actor))
        self.stdout.write(f"deleted corpus {name}: {counts}")
