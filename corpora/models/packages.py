"""The packages and classes the tasks loaded, and their tallies per pair and per snapshot."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from conversion.attribution import NAME_MAX as PACKAGE_NAME_MAX
from conversion.choices import TROUBLE_FROM
from corpora.choices import PACKAGE_KINDS
from corpora.models.tasks import PairStatusTally, PerTaskRow


class TaskPackage(PerTaskRow):
    """What one task's log says about one package or class it used (conversion/attribution.py): its
    evidence and verdicts as PackageFlag bits, and the task's error and fatal messages located in it.
    Written by corpora.message_store's message writer with the task's messages, in the same transaction,
    and deleted with them; like them it carries the task's status, document and pair, so the ranking of a
    pair is one index range (docs/decisions/package-attribution.md)."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "kind", "package", "task_id")
    kind = models.CharField(max_length=10, choices=PACKAGE_KINDS.choices)
    package = models.CharField(max_length=PACKAGE_NAME_MAX)
    flags = models.SmallIntegerField()
    errors = models.IntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["task_id"], name="taskpackage_task"),
            # The rows that show trouble (conversion.choices.TROUBLE_FROM), a few of them, each package's
            # in document order with what a snapshot freezes: the snapshot reads them from this index alone.
            models.Index(
                fields=["corpus_id", "service_id", "kind", "package", "document_id"],
                include=["task_status", "flags"],
                condition=Q(flags__gte=TROUBLE_FROM),
                name="taskpackage_trouble",
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.task_id} used {self.kind} {self.package}"


class PackageUsage(models.Model):
    """The dictionary of package usages: a package or class with the PackageFlag bits one task's log gave it.
    Append only, like MessageClass: an id always names the same usage."""

    id = models.AutoField(primary_key=True)
    kind = models.CharField(max_length=10, choices=PACKAGE_KINDS.choices)
    package = models.CharField(max_length=PACKAGE_NAME_MAX)
    flags = models.SmallIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "package", "flags"], name="packageusage_unique_key")]

    def __str__(self) -> str:
        return f"{self.kind} {self.package} ({self.flags})"


class PackageTally(PairStatusTally):
    """Per (corpus, service, task status, package usage): how many tasks have that usage. Kept exact by the
    message writer and deleter with TaskPackage, so a pair's ranking sums these rows, a few per package,
    never the tasks' rows (docs/decisions/package-attribution.md). Rows that fall to zero stay and are
    skipped."""

    pk = models.CompositePrimaryKey("corpus_id", "service_id", "task_status", "package_usage_id")
    package_usage_id = models.IntegerField()

    tally_key = "package_usage_id"


class SnapshotPackage(models.Model):
    """One package or class of a snapshot (corpora.pairs): its tallies, what a ranking of the snapshot sums,
    the tasks per (flags, status); and the documents whose tasks showed trouble with it (flags from
    TROUBLE_FROM up), ascending, with each one's task status and PackageFlag bits. Each in parallel arrays."""

    pk = models.CompositePrimaryKey("snapshot_id", "kind", "package")
    snapshot_id = models.BigIntegerField()
    kind = models.CharField(max_length=10, choices=PACKAGE_KINDS.choices)
    package = models.CharField(max_length=PACKAGE_NAME_MAX)
    document_ids = ArrayField(models.BigIntegerField())
    statuses = ArrayField(models.SmallIntegerField())
    flags = ArrayField(models.SmallIntegerField())
    tally_flags = ArrayField(models.SmallIntegerField(), db_default="{}")
    tally_statuses = ArrayField(models.SmallIntegerField(), db_default="{}")
    tally_tasks = ArrayField(models.IntegerField(), db_default="{}")

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id}: {self.kind} {self.package}"
