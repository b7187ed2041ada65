from __future__ import annotations

from typing import Any

from jobs.cli import DeleteCommand
from services.actions import service_delete


class Command(DeleteCommand):
    help = "Delete a service with all its tasks and messages in every corpus (--confirm NAME)."
    noun = "service"

    def delete(self, name: str, confirm: str | None) -> dict[str, Any]:
        return service_delete(name=name, confirm=confirm, actor=self.actor)
