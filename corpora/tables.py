"""The tables of corpora's models by name, for the modules that write their SQL by hand: one constant a table,
so that each statement names a table the same way and a renamed table is renamed here once."""

from corpora.models import (
    Activation,
    Corpus,
    Document,
    Experiment,
    ExperimentVariant,
    GrainSlice,
    MessageClass,
    MessageTally,
    PackageTally,
    PackageUsage,
    ReportGrain,
    Run,
    RuntimeBin,
    RuntimeCount,
    Snapshot,
    SnapshotClass,
    SnapshotDiff,
    SnapshotMembers,
    SnapshotPackage,
    StaleMessages,
    Task,
    TaskClass,
    TaskCount,
    TaskDiff,
    TaskMessages,
    TaskPackage,
    TaskRuntime,
    TelemetryBin,
    TelemetryMinute,
)

ACTIVATION_TABLE = Activation._meta.db_table
CORPUS_TABLE = Corpus._meta.db_table
DOCUMENT_TABLE = Document._meta.db_table
EXPERIMENT_TABLE = Experiment._meta.db_table
EXPERIMENT_VARIANT_TABLE = ExperimentVariant._meta.db_table
GRAIN_SLICE_TABLE = GrainSlice._meta.db_table
MESSAGE_CLASS_TABLE = MessageClass._meta.db_table
MESSAGE_TALLY_TABLE = MessageTally._meta.db_table
PACKAGE_TALLY_TABLE = PackageTally._meta.db_table
PACKAGE_USAGE_TABLE = PackageUsage._meta.db_table
REPORT_GRAIN_TABLE = ReportGrain._meta.db_table
RUNTIME_BIN_TABLE = RuntimeBin._meta.db_table
RUNTIME_COUNT_TABLE = RuntimeCount._meta.db_table
RUN_TABLE = Run._meta.db_table
SNAPSHOT_CLASS_TABLE = SnapshotClass._meta.db_table
SNAPSHOT_DIFF_TABLE = SnapshotDiff._meta.db_table
SNAPSHOT_MEMBERS_TABLE = SnapshotMembers._meta.db_table
SNAPSHOT_PACKAGE_TABLE = SnapshotPackage._meta.db_table
SNAPSHOT_TABLE = Snapshot._meta.db_table
STALE_MESSAGES_TABLE = StaleMessages._meta.db_table
TASK_CLASS_TABLE = TaskClass._meta.db_table
TASK_COUNT_TABLE = TaskCount._meta.db_table
TASK_DIFF_TABLE = TaskDiff._meta.db_table
TASK_MESSAGES_TABLE = TaskMessages._meta.db_table
TASK_PACKAGE_TABLE = TaskPackage._meta.db_table
TASK_RUNTIME_TABLE = TaskRuntime._meta.db_table
TASK_TABLE = Task._meta.db_table
TELEMETRY_BIN_TABLE = TelemetryBin._meta.db_table
TELEMETRY_MINUTE_TABLE = TelemetryMinute._meta.db_table
