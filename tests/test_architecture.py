"""The package structure holds at run time too: a rerun, the write that used to cross apps most
(docs/architecture.md, "The pair and its runs"), runs code of at most three apps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reports.actions import rerun
from tests.corpora.helpers import activated, imported

ROOT = Path(__file__).resolve().parent.parent
APPS = {"accounts", "corpora", "dispatcher", "jobs", "ops", "reports", "runs", "services"}


def _apps_run_by(call) -> list[str]:
    """The apps whose functions run while `call()` runs, in the order they are first entered."""
    seen: list[str] = []

    def profile(frame, event, _arg) -> None:
        if event != "call":
            return
        try:
            package = Path(frame.f_code.co_filename).resolve().relative_to(ROOT).parts[0]
        except ValueError:  # the standard library, Django, psycopg, ...
            return
        if package in APPS and package not in seen:
            seen.append(package)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.django_db(transaction=True)
def test_a_rerun_runs_code_of_at_most_three_apps(corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a")
    apps = _apps_run_by(lambda: rerun(corpus_name="a", service_name="tex_to_html", actor="tester"))
    assert apps[0] == "reports", apps
    assert set(apps) <= {"reports", "corpora", "services"}, apps
