"""Building corpora for tests through the same actions the API uses, with jobs run in-process."""

from __future__ import annotations

from pathlib import Path

from corpora.actions.corpora import corpus_import, service_activate
from jobs.models import Job
from jobs.runner import job_run
from services.actions import service_register
from tests.support import write_tex


def make_corpus_dir(root: Path, name: str, documents: int = 3) -> Path:
    directory = root / name
    directory.mkdir()
    for index in range(documents):
        write_tex(directory / f"doc{index}.tex")
    return directory


def imported(root: Path, name: str = "demo", documents: int = 3) -> Job:
    job = corpus_import(name=name, path=str(make_corpus_dir(root, name, documents)), actor="tester", send=False)
    job_run(job.pk)
    job.refresh_from_db()
    return job


def activated(corpus: str, service: str = "tex_to_html") -> Job:
    from services.models import Service

    if not Service.objects.filter(name=service).exists():
        service_register(name=service, actor="tester")
    job = service_activate(corpus_name=corpus, service_name=service, actor="tester", send=False)
    job_run(job.pk)
    job.refresh_from_db()
    return job
