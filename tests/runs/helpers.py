"""Run histories for tests, built fast: tasks get the statuses the test names (no conversion), and the
drained pair's run closes as ingestion would close it."""

from __future__ import annotations

from pathlib import Path

from django.db import connection, transaction

from conversion.choices import TaskStatus
from corpora.actions.reports import rerun
from corpora.message_store import messages_delete, messages_write
from corpora.models import Task
from corpora.pairs import runs_close_drained
from tests.corpora.helpers import activated, imported

CORPUS, SERVICE, NEXT = "a", "tex_to_html", "tex_to_html_next"
# doc0..doc3 in the first run, then after a rerun of everything, and under the other converter.
FIRST = [TaskStatus.NO_PROBLEM, TaskStatus.NO_PROBLEM, TaskStatus.WARNING, TaskStatus.FATAL]
SECOND = [
    TaskStatus.NO_PROBLEM,
    TaskStatus.ERROR,
    TaskStatus.WARNING,
    TaskStatus.WARNING,
]  # doc1 got worse, doc3 better
UNDER_NEXT = [
    TaskStatus.NO_PROBLEM,
    TaskStatus.ERROR,
    TaskStatus.WARNING,
    TaskStatus.FATAL,
]  # differs from SECOND on doc3 only


def finish(statuses: list[int], service: str = SERVICE, corpus: str = CORPUS) -> None:
    """Give the pair's tasks (in document order) these statuses and close its drained run."""
    tasks = list(Task.objects.filter(corpus__name=corpus, service__name=service).order_by("document_id"))
    for task, status in zip(tasks, statuses, strict=True):
        Task.objects.filter(pk=task.pk).update(status=status)
    runs_close_drained({(tasks[0].corpus_id, tasks[0].service_id)})


def two_runs(corpus_root: Path, *, with_next: bool = True) -> None:
    """Corpus a (doc0..doc3) with two closed runs of tex_to_html (FIRST, then SECOND after a rerun of
    everything), so two snapshots; and tex_to_html_next finished with UNDER_NEXT."""
    imported(corpus_root, CORPUS, documents=4)
    activated(CORPUS)
    finish(FIRST)
    rerun(corpus_name=CORPUS, service_name=SERVICE, actor="tester", description="after the upgrade")
    finish(SECOND)
    if with_next:
        activated(CORPUS, NEXT)
        finish(UNDER_NEXT, NEXT)


Class = tuple[str, str, str]  # (severity, category, what)
_STATUS_OF = {"fatal": TaskStatus.FATAL, "error": TaskStatus.ERROR, "warning": TaskStatus.WARNING}


def pair_tasks(corpus: str = CORPUS, service: str = SERVICE) -> list[Task]:
    return list(Task.objects.filter(corpus__name=corpus, service__name=service).order_by("document_id"))


def classes_write(having: list[set[Class]], corpus: str = CORPUS, service: str = SERVICE) -> None:
    """Give each task of the pair (in document order) messages of the classes named, two of each (so the
    message and task counts differ), through the one message writer, and the status its worst class
    makes (no problem without any)."""
    with transaction.atomic(), connection.cursor() as cursor:
        for task, classes in zip(pair_tasks(corpus, service), having, strict=True):
            status = min((_STATUS_OF[c[0]] for c in classes if c[0] in _STATUS_OF), default=TaskStatus.NO_PROBLEM)
            Task.objects.filter(pk=task.pk).update(status=status)
            messages = [(*c, f"details {n}") for c in sorted(classes) for n in range(2)]
            messages_delete(cursor, [task.pk])
            messages_write(cursor, [(task.pk, task.corpus_id, task.service_id, status, messages)])


def pair_close(corpus: str = CORPUS, service: str = SERVICE) -> None:
    """Close the pair's run, drained as the tasks' statuses say (with its snapshot)."""
    task = pair_tasks(corpus, service)[0]
    runs_close_drained({(task.corpus_id, task.service_id)})
