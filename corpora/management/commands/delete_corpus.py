from __future__ import annotations

from config.api.deletions import Deleted
from corpora.actions.corpora import corpus_delete
from jobs.cli import DeleteCommand


class Command(DeleteCommand):
    help = "Delete a corpus with all its documents, tasks and log messages (--confirm NAME)."
    noun = "corpus"

    def delete(self, name: str, confirm: str | None) -> Deleted:
        return corpus_delete(name=name, confirm=confirm, actor=self.actor)
