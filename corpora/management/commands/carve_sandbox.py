from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from corpora.actions.corpora import corpus_sandbox
from corpora.serializers import SandboxRequestSerializer
from jobs.cli import ServiceCommand


class Command(ServiceCommand):
    help = "Carve a sandbox corpus from a parent's documents that match a condition (runs the job here)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("parent")
        parser.add_argument("name")
        parser.add_argument("--service", required=True, help="a service active on the parent")
        parser.add_argument("--severity", help="a severity key: the tasks need such a message")
        parser.add_argument("--category", help="the message's category (needs --severity)")
        parser.add_argument("--what", help="the message's what (needs --category)")
        parser.add_argument("--status", help="a severity key whose task statuses replace the severity's")
        parser.add_argument("--entry-contains", dest="entry_contains", help="a substring of the entry")
        parser.add_argument("--limit", type=int, help="at most this many documents in all")
        parser.add_argument("--per-class-limit", dest="per_class_limit", type=int, help="at most N per class")
        parser.add_argument("--seed", type=int, default=0, help="the same seed takes the same sample")

    def handle(self, *args: object, parent: str, name: str, **options: Any) -> None:
        fields = SandboxRequestSerializer().get_fields()
        request = {"name": name, **{key: options[key] for key in fields if options.get(key) is not None}}

        job = self.write_action(
            lambda: corpus_sandbox(
                parent=parent, actor=self.actor, send=False, submitted=SandboxRequestSerializer(data=request)
            )
        )
        self.run_job(job)
