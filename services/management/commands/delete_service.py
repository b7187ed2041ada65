from __future__ import annotations

from config.api.deletions import Deleted
from jobs.cli import DeleteCommand
from services.actions import service_delete


class Command(DeleteCommand):
    help = "Delete a service with all its tasks and messages in every corpus (--confirm NAME)."
    noun = "service"

    def delete(self, name: str, confirm: str | None) -> Deleted:
        return service_delete(name=name, confirm=confirm, actor=self.actor)
