"""The vocabularies of jobs, each spelled here once: a job's state and health, the kinds of job there are and
the lanes they run in."""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


ACTIVE_STATES = (JobState.QUEUED, JobState.RUNNING)
# The states of a job that ended without its result; its health is failed.
FAILED_STATES = (JobState.FAILED, JobState.INTERRUPTED)


class JobHealth(models.TextChoices):
    """A job's health, as the jobs API (`jobs/serializers.py`) and the metrics report it."""

    OK = "ok"
    STALLED = "stalled"
    FAILED = "failed"


class JobKinds(models.TextChoices):
    """The name of every job kind. Each app's `tasks.py` registers its function under one of these
    (`jobs.registry.job_kind`), and the actions that start a job name it by the same constant."""

    CORPUS_IMPORT = "corpus_import"
    CORPUS_EXTEND = "corpus_extend"
    CORPUS_SANDBOX = "corpus_sandbox"
    EXPERIMENT_RUN = "experiment_run"
    SERVICE_ACTIVATE = "service_activate"
    RESULTS_REMOVE = "results_remove"
    DATASET_EXPORT = "dataset_export"
    REPORTS_REFRESH = "reports_refresh"
    REPORT_SLICE_BUILD = "report_slice_build"
    MESSAGES_PURGE = "messages_purge"
    MAINTENANCE_REINDEX = "maintenance_reindex"
    MAINTENANCE_ANALYZE = "maintenance_analyze"


class JobLanes(models.TextChoices):
    """Lanes: the kinds of one lane run one at a time (`jobs.registry.job_kind(..., lane=...)`)."""

    # Work that takes table-level locks on the busiest tables (REINDEX CONCURRENTLY, ANALYZE, VACUUM):
    # two at once wait for each other's locks and snapshots and deadlock.
    MAINTENANCE = "maintenance"


# The Celery task that runs a job (jobs/tasks.py), by its registered name: jobs/actions.py sends it by this name.
RUN_JOB_TASK = "jobs.tasks.run_job"
