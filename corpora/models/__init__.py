"""Every table that corpora's modules write (docs/architecture.md, "Each table sits with its writer"), one
module a topic: `corpora` (corpora, incl. sandboxes, their documents, activations of services), `tasks`
(tasks, their counts and runtimes), `runs` (each pair's runs and snapshots, the diffs of snapshots),
`messages` (the tasks' log messages, their classes and tallies, the report rollup), `packages` (the
packages the tasks loaded), `telemetry` (the runs' telemetry) and `experiments`. Django finds the models
here, and callers import them from here: `from corpora.models import Task`.

Tasks and their log messages reach millions of rows, so bulk work on them is raw set-based SQL and
their foreign keys do not cascade through Django (a Python cascade would load every row).
"""

from corpora.models.corpora import Activation, Corpus, Document
from corpora.models.experiments import Experiment, ExperimentVariant
from corpora.models.messages import (
    GrainSlice,
    LogMessage,
    MessageClass,
    MessageTally,
    ReportGrain,
    StaleMessages,
    TaskClass,
    TaskMessages,
)
from corpora.models.packages import PackageTally, PackageUsage, SnapshotPackage, TaskPackage
from corpora.models.runs import MEMBERS_CHUNK, Run, Snapshot, SnapshotClass, SnapshotDiff, SnapshotMembers, TaskDiff
from corpora.models.tasks import RUNTIME_BIN_MS, RuntimeBin, RuntimeCount, Task, TaskCount, TaskRuntime
from corpora.models.telemetry import TelemetryBin, TelemetryMinute

__all__ = [
    "MEMBERS_CHUNK",
    "RUNTIME_BIN_MS",
    "Activation",
    "Corpus",
    "Document",
    "Experiment",
    "ExperimentVariant",
    "GrainSlice",
    "LogMessage",
    "MessageClass",
    "MessageTally",
    "PackageTally",
    "PackageUsage",
    "ReportGrain",
    "Run",
    "RuntimeBin",
    "RuntimeCount",
    "Snapshot",
    "SnapshotClass",
    "SnapshotDiff",
    "SnapshotMembers",
    "SnapshotPackage",
    "StaleMessages",
    "Task",
    "TaskClass",
    "TaskCount",
    "TaskDiff",
    "TaskMessages",
    "TaskPackage",
    "TaskRuntime",
    "TelemetryBin",
    "TelemetryMinute",
]
