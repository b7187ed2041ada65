"""The vocabularies of the conversion domain, each spelled here once: a corpus's state, the model choices of a
log message's severity (built from `conversion.choices.Severity`, which the worker's log parser shares), how a
dataset export groups its archives, how a message class changed between two snapshots, whether a document
gained or lost a class, and what a run control does to a pair's (or every pair's) conversions.

The task statuses themselves are `conversion.choices.TaskStatus`; what the apps derive from them (count
buckets, severity pages, SQL predicates) is in `corpora/statuses.py`."""

from __future__ import annotations

from django.db import models

from conversion.choices import PackageKind, Severity


class CorpusState(models.TextChoices):
    IMPORTING = "importing"
    READY = "ready"


class ClassLevel(models.IntegerChoices):
    """A row of the message class dictionary (MessageClass.level): a (severity, category, what) of log
    messages, or a rollup the reports count, of a (severity, category) or of a severity alone."""

    CLASS = 0
    CATEGORY = 1
    SEVERITY = 2


class Stage(models.IntegerChoices):
    """What run telemetry counts per log-scale bin (TelemetryBin.stage): a stage of a task's way through the
    system, timed in milliseconds, or the peak resident memory of its conversion, in KiB (the run's cost,
    docs/decisions/cost-and-schedule.md); the label is its name in the API."""

    QUEUE_WAIT = 0, "queue_wait"
    CONVERSION = 1, "conversion"
    INGESTION = 2, "ingestion"
    END_TO_END = 3, "end_to_end"
    PEAK_MEMORY = 4, "peak_memory"


# The stages that are times (the telemetry's stage table); PEAK_MEMORY is the cost's.
TIMED_STAGES = (Stage.QUEUE_WAIT, Stage.CONVERSION, Stage.INGESTION, Stage.END_TO_END)


class ExportGrouping(models.TextChoices):
    """How a dataset export splits its papers into archives: by the task's status, by month, or not at all."""

    SEVERITY = "severity"
    MONTH = "month"
    NONE = "none"


# A stored message's severity, as the message models' `choices`: the values of `Severity`, titled. (The two
# ignores below: django-stubs types a call of TextChoices as the str constructor, not as Enum's functional API.)
MessageSeverity = models.TextChoices(  # type: ignore[call-overload]
    "MessageSeverity", [(severity.name, (severity.value, severity.value.title())) for severity in Severity]
)

# What a package of package attribution is (TaskPackage.kind), as model choices: the values of `PackageKind`.
PACKAGE_KINDS = models.TextChoices(  # type: ignore[call-overload]
    "PackageKinds", [(kind.name, (kind.value, kind.value)) for kind in PackageKind]
)


class ClassChange(models.TextChoices):
    """How a class's task count moved between the previous snapshot (p) and the current one (c): four kinds
    of one class, and two filters that take two kinds each (more tasks now, or fewer)."""

    APPEARED = "appeared"
    VANISHED = "vanished"
    GREW = "grew"
    SHRANK = "shrank"
    INCREASED = "increased"
    DECREASED = "decreased"


class MemberChange(models.TextChoices):
    """A document that has a class now and did not before (gained), or the reverse (lost)."""

    GAINED = "gained"
    LOST = "lost"


class RunControlAction(models.TextChoices):
    """Pause blocks every task in progress; resume puts the blocked ones back to TODO."""

    PAUSE = "pause"
    RESUME = "resume"
