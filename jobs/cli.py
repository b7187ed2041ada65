"""Shared by the management commands: the CLI actor, user errors as one line, and jobs run in the
command's own process so the operator sees them finish (no running worker needed). The actions journal
themselves (accounts.actions.journaled) under the actor a command passes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.cli import cli_actor
from config.api.deletions import Deleted
from config.errors import ServiceError
from jobs.choices import JobState
from jobs.models import Job
from jobs.runner import job_run


class ServiceCommand(BaseCommand):
    def write_action(self, call: Callable[[], Any]) -> Any:
        """Run one write action (as self.actor); a user error becomes a CommandError line."""
        try:
            return call()
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc

    def run_job(self, job: Job) -> Job:
        """Run a queued job here and now; fail the command if the job fails."""
        self.stdout.write(f"job {job.kind} {job.pk} started")
        job_run(job.pk)
        job.refresh_from_db()
        if job.state != JobState.SUCCEEDED:
            raise CommandError(f"job {job.kind} {job.pk} {job.state}: {job.message}")
        self.stdout.write(f"job {job.kind} {job.pk} succeeded: {job.result}")
        return job

    @property
    def actor(self) -> str:
        return cli_actor()


class DeleteCommand(ServiceCommand):
    """A command that deletes one named thing with all it holds, confirmed by --confirm NAME, and prints the
    counts of what went: a subclass names the thing (`noun`) and calls its delete action (`delete`)."""

    noun: str

    def delete(self, name: str, confirm: str | None) -> Deleted:
        raise NotImplementedError

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--confirm", help=f"must equal the {self.noun} name")

    def handle(self, *args: object, name: str, confirm: str | None, **options: Any) -> None:
        deleted: Deleted = self.write_action(lambda: self.delete(name, confirm))
        self.stdout.write(f"deleted {self.noun} {name}: {deleted.counts()}")
