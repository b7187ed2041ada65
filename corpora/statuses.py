"""What the Django apps derive from the task statuses (`conversion.choices.TaskStatus`, defined there once
for the worker side too): the count buckets and their names, the report severity pages (and their check),
the run diffs' buckets, and the "in progress" and "blocked" predicates, in Python and as SQL fragments.

Status: 0 TODO, > 0 a lease mark (the dispatcher's random positive number), -1..-5 completed,
<= -6 blocked (pause writes BLOCKED). "In progress" is TODO or leased (>= 0).
"""

from __future__ import annotations

from config.errors import BadRequest
from conversion.choices import COMPLETED, COMPLETED_NAMES, CORTEX_NEVER_COMPLETED, Category, Severity, TaskStatus

# The task-count triggers (corpora migration 0002, ccs_status_bucket) count every lease mark in this
# bucket and every blocked status in BLOCKED's.
QUEUED_BUCKET = 1

# Keys of per-service counts, in display order, and the count bucket of each.
STATUS_KEYS: dict[str, int] = {
    "todo": TaskStatus.TODO,
    "queued": QUEUED_BUCKET,
    **{COMPLETED_NAMES[status]: status for status in COMPLETED},
    "blocked": TaskStatus.BLOCKED,
}
# The overview's order: results first, then what is not done.
OVERVIEW_ORDER: tuple[str, ...] = (*(COMPLETED_NAMES[status] for status in COMPLETED), "blocked", "todo", "queued")
BUCKET_NAMES: dict[int, str] = {bucket: key for key, bucket in STATUS_KEYS.items()}
# A run stays open while its pair has a task in one of these buckets (TODO, leased, blocked).
BUSY_BUCKETS: tuple[int, ...] = (TaskStatus.TODO, QUEUED_BUCKET, TaskStatus.BLOCKED)

# Run diffs and converter comparisons: a snapshot or a service holds each task by its count bucket;
# a document on one side only is "absent" on the other. ABSENT is no task status, only a diff's.
ABSENT = "absent"
ABSENT_BUCKET = 9
DIFF_BUCKET_NAMES: dict[int, str] = {**BUCKET_NAMES, ABSENT_BUCKET: ABSENT}
DIFF_BUCKETS: dict[str, int] = {name: bucket for bucket, name in DIFF_BUCKET_NAMES.items()}
DIFF_STATUSES: tuple[str, ...] = (*OVERVIEW_ORDER, ABSENT)
# Worse is higher: a transition between two completed statuses to a higher rank is a regression.
_RANK: dict[str, int] = {
    COMPLETED_NAMES[status]: rank
    for status, rank in {
        TaskStatus.NO_PROBLEM: 0,
        TaskStatus.WARNING: 1,
        TaskStatus.ERROR: 2,
        TaskStatus.FATAL: 3,
        TaskStatus.INVALID: 3,
    }.items()
}

# The messages that a completed status's severity page lists (a task without problems has only info).
_PAGE_MESSAGES: dict[int, str] = {
    TaskStatus.NO_PROBLEM: Severity.INFO,
    TaskStatus.WARNING: Severity.WARNING,
    TaskStatus.ERROR: Severity.ERROR,
    TaskStatus.FATAL: Severity.FATAL,
    TaskStatus.INVALID: Severity.FATAL,
}
# Severity page -> (statuses of the tasks it covers, severity of the messages it lists): one page per
# completed status, then the info page over every completed task.
SEVERITIES: dict[str, tuple[tuple[int, ...], str]] = {
    **{COMPLETED_NAMES[status]: ((status,), _PAGE_MESSAGES[status]) for status in COMPLETED},
    Severity.INFO: (COMPLETED, Severity.INFO),
}

# SQL predicates on a task's `status` column (fixed text, safe to join into a statement).
IN_PROGRESS_SQL = f"status >= {TaskStatus.TODO}"
LEASED_SQL = f"status > {TaskStatus.TODO}"
BLOCKED_SQL = f"status <= {TaskStatus.BLOCKED}"


def infrastructure_class_sql(alias: str) -> str:
    """An SQL predicate on a message class row `alias` (corpora.models.MessageClass, a class or a category
    rollup): a fatal of the machine's, not the converter's (Category.INFRASTRUCTURE, or CorTeX's own name for
    a task whose attempts all ran out). Fixed text, safe to join into a statement."""
    category, what = CORTEX_NEVER_COMPLETED
    return (
        f"({alias}.severity = '{Severity.FATAL}' AND ({alias}.category = '{Category.INFRASTRUCTURE}'"
        f" OR ({alias}.category = '{category}' AND {alias}.what = '{what}')))"
    )


# A filter of a pair's documents by their task's status: each key of the per-status counts (STATUS_KEYS
# and in_progress, their names in a count record) and its SQL predicate on `status`.
IN_PROGRESS = "in_progress"
STATUS_FILTERS: dict[str, str] = {
    **{COMPLETED_NAMES[status]: f"status = {status}" for status in COMPLETED},
    IN_PROGRESS: IN_PROGRESS_SQL,
    "todo": f"status = {TaskStatus.TODO}",
    "queued": LEASED_SQL,
    "blocked": BLOCKED_SQL,
}


def in_progress(status: int) -> bool:
    """TODO or leased: the task still waits for a result."""
    return status >= TaskStatus.TODO


def leased(status: int) -> bool:
    """Carries a lease mark: handed to (or queued for) a worker."""
    return status > TaskStatus.TODO


def blocked(status: int) -> bool:
    """Paused: neither handed out nor counted as done."""
    return status <= TaskStatus.BLOCKED


def severity_check(severity: str, key: str = "severity") -> tuple[tuple[int, ...], str]:
    """A severity page's statuses and message severity, or BadRequest on the field `key` for an unknown one."""
    if severity not in SEVERITIES:
        raise BadRequest(f"Unknown {key} {severity!r}; use one of {', '.join(SEVERITIES)}.", errors={key: ["unknown"]})
    return SEVERITIES[severity]


def status_name(status: int) -> str:
    """The name of any task status: todo, queued, a completed status's name, or blocked."""
    if in_progress(status):
        return "todo" if status == TaskStatus.TODO else "queued"
    return COMPLETED_NAMES.get(status, "blocked")


def status_rank_sql(column: str) -> str:
    """An SQL expression of a task status column's rank: worse is higher, null unless completed (so a
    comparison with a task in progress is null). Fixed text, safe to join into a statement."""
    ranks = {status: _RANK[name] for status, name in COMPLETED_NAMES.items()}
    return f"(CASE {column} " + " ".join(f"WHEN {status} THEN {rank}" for status, rank in ranks.items()) + " END)"


def regressed(previous: str, current: str) -> bool:
    """Both completed and the current status is worse (no_problem -> warning, error -> fatal, ...)."""
    return previous in _RANK and current in _RANK and _RANK[current] > _RANK[previous]


def improved(previous: str, current: str) -> bool:
    """Both completed and the current status is better (error -> no_problem, fatal -> warning, ...)."""
    return previous in _RANK and current in _RANK and _RANK[current] < _RANK[previous]
