from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.cli import cli_actor
from config.errors import ServiceError
from corpora.actions.history import history_prune
from corpora.queries.prune import CUTOFF_HELP, PruneCounts, PruneSummary, prune_cutoff, prune_preview


def _counts(counts: PruneCounts) -> str:
    return (
        f"{counts.runs} runs, {counts.snapshots} snapshots, {counts.diffs} diffs,"
        f" {counts.diff_rows} diff rows, {counts.bytes} bytes"
    )


class Command(BaseCommand):
    help = (
        "Remove run history before a date: finished runs, snapshots (never a pair's latest) and their diffs."
        " The open run of a pair is never touched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--before", required=True, help=CUTOFF_HELP)
        parser.add_argument("--corpus", help="only this corpus")
        parser.add_argument("--service", help="only this service")
        parser.add_argument("--dry-run", action="store_true", help="print what would be removed, change nothing")

    def handle(
        self, *args: object, before: str, corpus: str | None, service: str | None, dry_run: bool, **options: object
    ) -> None:
        try:
            cutoff = prune_cutoff(before)
            if dry_run:
                summary = prune_preview(cutoff, corpus, service)
            else:
                summary = history_prune(before=cutoff, corpus=corpus, service=service, actor=cli_actor())
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(self._report(summary, dry_run))

    def _report(self, summary: PruneSummary, dry_run: bool) -> str:
        verb = "would remove (dry run, nothing changed)" if dry_run else "removed"
        lines = [f"history before {summary.before.isoformat()}: {verb}"]
        lines += [f"{pair.corpus}/{pair.service}: {_counts(pair)}" for pair in summary.pairs]
        lines.append(f"total: {_counts(summary.total)}")
        return "\n".join(lines)
