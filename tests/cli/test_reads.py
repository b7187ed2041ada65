"""Every read of ccs: `--json` prints what the API answers to the same request, and the tables for people
show the records. Paginated lists print one page with --json, the page options passed through."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from corpora.actions.history import snapshot_append
from tests.cli.conftest import IO_FATAL
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import classes_write, pair_close

pytestmark = pytest.mark.django_db(transaction=True)

PAIR = "a tex_to_html"

# (ccs arguments, the API's path and query for the same thing)
READS: list[tuple[str, str]] = [
    ("status", "/api/status"),
    ("dashboard", "/api/dashboard"),
    ("corpora", "/api/corpora"),
    ("corpus a", "/api/corpora/a"),
    ("services", "/api/services"),
    ("profiles", "/api/profiles"),
    ("service tex_to_html", "/api/services/tex_to_html"),
    ("workers tex_to_html", "/api/services/tex_to_html/workers"),
    (f"report {PAIR}", "/api/reports/a/tex_to_html"),
    (f"report {PAIR} warning", "/api/reports/a/tex_to_html/warning"),
    (f"report {PAIR} error undefined", "/api/reports/a/tex_to_html/error/undefined"),
    (f"report {PAIR} fatal I/O a/b.tex --page-size 1", "/api/reports/a/tex_to_html/fatal/I/O/a/b.tex?page_size=1"),
    (
        f"documents {PAIR} --name-prefix DOC --page-size 2",
        "/api/corpora/a/services/tex_to_html/documents?name_prefix=DOC&page_size=2",
    ),
    (f"document {PAIR} doc1", "/api/corpus/a/tex_to_html/document/doc1"),
    (f"history {PAIR} doc1", "/api/corpus/a/tex_to_html/document/doc1/history"),
    ("runtimes tex_to_html --page-size 2", "/api/services/tex_to_html/runtimes?page_size=2"),
    ("runs", "/api/runs"),
    ("runs --corpus a --limit 1", "/api/runs?corpus=a&limit=1"),
    (f"runs {PAIR}", "/api/runs/a/tex_to_html"),
    (f"run {PAIR}", "/api/runs/a/tex_to_html/current"),
    (f"telemetry {PAIR}", "/api/runs/a/tex_to_html/telemetry"),
    (f"cost {PAIR}", "/api/runs/a/tex_to_html/cost"),
    (f"diff {PAIR}", "/api/runs/a/tex_to_html/diff"),
    (f"diff {PAIR} --exclude-infrastructure", "/api/runs/a/tex_to_html/diff?exclude_infrastructure=true"),
    (f"tasks {PAIR} --page-size 2 --offset 1", "/api/runs/a/tex_to_html/tasks?page_size=2&offset=1"),
    (f"tasks {PAIR} --exclude-infrastructure", "/api/runs/a/tex_to_html/tasks?exclude_infrastructure=true"),
    (f"classes {PAIR} --kind appeared", "/api/runs/a/tex_to_html/classes?kind=appeared"),
    (
        f"class-tasks {PAIR} warning missing_file x.sty --change gained",
        "/api/runs/a/tex_to_html/classes/warning/missing_file/x.sty/tasks?change=gained",
    ),
    (f"packages {PAIR} --kind package --page-size 2", "/api/runs/a/tex_to_html/packages?kind=package&page_size=2"),
    (f"package-papers {PAIR} package x", "/api/runs/a/tex_to_html/packages/package/x"),
    (f"package-diff {PAIR}", "/api/runs/a/tex_to_html/packages/diff"),
    ("compare a tex_to_html next", "/api/compare/a/tex_to_html/next"),
    ("compare-tasks a tex_to_html next", "/api/compare/a/tex_to_html/next/tasks"),
    ("jobs", "/api/jobs"),
    ("jobs --active --limit 1", "/api/jobs?active=true&limit=1"),
    ("job {job}", "/api/jobs/{job}"),
    ("audit --limit 3", "/api/audit?limit=3"),
    ("sessions", "/api/sessions"),
    ("passkeys", "/api/passkeys"),
    ("logs --limit 5 --level ERROR", "/api/logs?limit=5&level=ERROR"),
    ("health", "/api/health"),
    ("config", "/api/config"),
    ("statistics --corpus a", "/api/statistics?corpus=a"),
    ("exports", "/api/exports"),
    ("experiments", "/api/experiments"),
]

# Fields that change from one request to the next by themselves: the time a check ran and what the health
# checks measure (heartbeat ages, free bytes).
VOLATILE = {"/api/health": ("checked_at", "checks"), "/api/dashboard": ("health",)}


def _same(path: str, ours: Any, theirs: Any) -> None:
    base = path.split("?")[0]
    for key in VOLATILE.get(base, ()):
        if isinstance(ours, dict) and isinstance(theirs, dict):
            assert (key in ours) == (key in theirs)
            ours.pop(key, None), theirs.pop(key, None)
    assert ours == theirs


@pytest.mark.slow
@pytest.mark.parametrize(("args", "path"), READS, ids=[args.split()[0] + ":" + path for args, path in READS])
def test_json_of_every_read_is_the_apis_answer(ccs, http, pair, args, path):
    argv, path = args.format(**pair).split(" "), path.format(**pair)
    result = ccs(*argv, "--json")
    assert result.returncode == 0, result.stderr
    answer = http.get(path)
    assert answer.status_code == 200, answer.text
    _same(path, json.loads(result.stdout), answer.json())
    if not VOLATILE.get(path.split("?")[0]):
        assert result.stdout.strip() == answer.text.strip()  # the same bytes, not only the same structure


# Reads that need data the pair above has not, each with its test against the API's answer.
TESTED_ELSEWHERE = {"experiment show": "tests/cli/test_experiments.py"}


def test_every_read_of_the_table_has_a_test():
    from cli.spec import READS as COMMANDS

    tested = {args.split()[0] for args, _ in READS} | set(TESTED_ELSEWHERE)
    assert {command.words for command in COMMANDS} | {"config"} == tested


@pytest.mark.slow
def test_tables_for_people_show_the_records(ccs, pair):
    corpora = ccs("corpora")
    assert corpora.returncode == 0, corpora.stderr
    assert "name" in corpora.stdout and "a " in corpora.stdout and "tex_to_html" in corpora.stdout
    report = ccs("report", "a", "tex_to_html", "warning")
    assert report.returncode == 0, report.stderr
    assert "missing_file" in report.stdout and "{" not in report.stdout.splitlines()[0]
    health = ccs("health")
    assert "conversion_sandbox" in health.stdout and "status" in health.stdout
    assert ccs("run", "a", "tex_to_html").stdout.strip() == "no open run"


@pytest.mark.slow
def test_diff_leaves_out_the_infrastructure_failures_on_request(ccs, corpus_root):
    """doc0 went from no problem to an infrastructure failure, doc1 to a converter fatal: the matrix with
    --exclude-infrastructure counts doc1 alone, without it both, and the table for people says so."""
    imported(corpus_root, "a", documents=3)
    activated("a")
    classes_write([set(), set(), set()])
    pair_close()
    classes_write([{("fatal", "infrastructure", "worker_died")}, {IO_FATAL}, set()])
    snapshot_append(corpus_name="a", service_name="tex_to_html", actor="tester")

    def moved(*flags: str) -> dict[str, Any]:
        result = ccs("diff", "a", "tex_to_html", *flags, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    everything, without = moved(), moved("--exclude-infrastructure")
    to_fatal = [c["count"] for c in everything["matrix"] if (c["previous"], c["current"]) == ("no_problem", "fatal")]
    assert to_fatal == [2] and everything["infrastructure"] == 1 and everything["changed"] == 2
    to_fatal = [c["count"] for c in without["matrix"] if (c["previous"], c["current"]) == ("no_problem", "fatal")]
    assert to_fatal == [1] and without["exclude_infrastructure"] is True and without["changed"] == 1
    table = ccs("diff", "a", "tex_to_html", "--exclude-infrastructure")
    assert table.returncode == 0, table.stderr
    changed = [line for line in table.stdout.splitlines() if line.split()[:1] == ["changed"]]
    assert changed and changed[0].split()[1] == "1", table.stdout
    assert re.search(r"no_problem\s+fatal\s+1\s+yes", table.stdout), table.stdout
