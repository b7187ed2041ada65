"""The vocabularies of corpora, each spelled here once: a corpus's state, the model choices of a log message's
severity (built from `conversion.choices.Severity`, which the worker's log parser shares), and how a dataset
export groups its archives.

The task statuses themselves are `conversion.choices.TaskStatus`; what the apps derive from them (count
buckets, severity pages, SQL predicates) is in `corpora/statuses.py`."""

from __future__ import annotations

from django.db import models

from conversion.choices import Severity


class CorpusState(models.TextChoices):
    IMPORTING = "importing"
    READY = "ready"


class ExportGrouping(models.TextChoices):
    """How a dataset export splits its papers into archives: by the task's status, by month, or not at all."""

    SEVERITY = "severity"
    MONTH = "month"
    NONE = "none"


# A stored message's severity, as the message models' `choices`: the values of `Severity`, titled.
MessageSeverity = models.TextChoices(
    "MessageSeverity", [(severity.name, (severity.value, severity.value.title())) for severity in Severity]
)
