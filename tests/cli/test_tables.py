"""Every read of ccs, as a person reads it in a terminal of 80 columns: no line wider than that (nothing for
the terminal to wrap), a list's records one line each (nothing folded inside a cell either), the columns
that read is for present, names before long text, and links as full URLs on the server, never paths."""

from __future__ import annotations

import json
import re

import pytest

from corpora.experiments.actions import experiment_start
from jobs.runner import job_run
from tests.corpora.helpers import activated, imported

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WIDTH = 80
PAIR = "a tex_to_html"
LONG = "a-corpus-whose-name-is-rather-long-for-any-table"

# (ccs arguments, what must show): the key fields and column headers of each read, and a value or two.
READS: list[tuple[str, tuple[str, ...]]] = [
    ("status", ("server", "{url} (from $CCS_URL)", "corpora", "backlog", "latest run")),
    ("dashboard", ("health", "backlog", "open runs", "run", "corpus", "service", "done", "eta", LONG[:12])),
    ("corpora", ("name", "state", "documents", "services", LONG[:12])),
    ("corpus a", ("services", "service", "total", "left", "error", "fatal", "{url}/api/corpora/a")),
    ("services", ("name", "version", "corpora", "description", "tex_to_html")),
    ("service tex_to_html", ("name", "profile", "lease", "{url}/api/services/tex_to_html")),
    ("profiles", ("name", "hash", "description", "default")),
    ("workers tex_to_html", ("no worker",)),
    (f"report {PAIR}", ("status", "tasks", "warning")),
    (f"report {PAIR} warning", ("category", "tasks", "meaning", "missing_file")),
    (f"report {PAIR} error undefined", ("what", "tasks", "\\alpha")),
    (f"report {PAIR} fatal I/O a/b.tex", ("document", "status", "details", "doc3")),
    (f"documents {PAIR}", ("document", "status", "html", "doc1", "report: {url}/api/corpus/a/tex_to_html/document/")),
    (f"document {PAIR} doc1", ("status", "summary", "messages", "severity", "category", "what", "undefined")),
    (f"history {PAIR} doc1", ("snapshots", "taken", "status", "classes", "{url}/corpus/a/tex_to_html/document/doc1")),
    ("runtimes tex_to_html", ("conversions", "percentiles")),
    ("runs", ("run", "corpus", "service", "started", "done", "failed", LONG[:12])),
    (f"runs {PAIR}", ("run", "started", "took", "done")),
    (f"run {LONG} tex_to_html", ("run", "pair", "done", "rate", "eta", "tallies")),
    (f"telemetry {PAIR}", ("stages", "stage", "p50", "p99")),
    (f"cost {PAIR}", ("open run", "last closed run", "CPU seconds")),
    (f"diff {PAIR}", ("previous", "current", "changed", "regressions", "documents", "regression")),
    (f"tasks {PAIR}", ("document", "previous", "current", "regression", "report: {url}/api/corpus/")),
    (f"classes {PAIR}", ("severity", "category", "what", "kind", "change", "meaning", "missing_file")),
    (f"class-tasks {PAIR} warning missing_file x.sty --change gained", ("document", "change", "history: {url}/")),
    (f"packages {PAIR}", ("packages",)),
    (f"package-papers {PAIR} package x", ("no paper",)),
    (f"package-diff {PAIR}", ("previous", "current")),
    ("compare a tex_to_html next", ("service a", "service b", "differ", "documents", "regression")),
    ("compare-tasks a tex_to_html next", ("document", "A's report: {url}/api/corpus/a/tex_to_html/document/")),
    ("jobs", ("uuid", "kind", "state", "created", "service_activate")),
    ("job {job}", ("uuid", "kind", "state", "progress", "{url}/api/jobs/{job}")),
    ("audit", ("time", "actor", "action", "target", "outcome")),
    ("sessions", ("no session",)),
    ("passkeys", ("name", "actor", "created", "laptop")),
    ("logs", ("older page",)),
    ("health", ("check", "status", "summary", "conversion_sandbox")),
    ("config", ("key", "value", "source", "dispatcher.max_in_flight")),
    ("statistics", ("corpus", "service", "runs", "mean", "tasks/hour")),
    ("exports", ("no export",)),
    ("experiments", ("name", "pair", "variants", "state", "a/tex_to_html", "experiment: {url}/api/experiments/")),
    ("experiment show exp", ("rank", "variant", "fixed", "broken", "styles", "papers")),
]
GROUPS = ("experiment",)


def _command_words(args: str) -> str:
    words = args.split()
    return " ".join(words[:2]) if words[0] in GROUPS else words[0]


def table_rows(lines: list[str]) -> list[str]:
    """The lines of the first table under its header's rule, up to an empty line or a link pattern."""
    rules = [number for number, line in enumerate(lines) if set(line.strip()) == {"─"}]
    if not rules:
        return []
    start, rows = rules[0] + 1, []
    for line in lines[start:]:
        if not line.strip() or re.match(r"^[\w' ]+: http", line):
            break
        rows.append(line)
    return rows


def test_every_read_of_the_table_is_drawn_here():
    from cli.spec import READS as COMMANDS

    assert {command.words for command in COMMANDS} | {"config"} == {_command_words(args) for args, _ in READS}


def test_every_read_fits_80_columns_with_its_key_columns(ccs, pair, corpus_root, live_server):
    imported(corpus_root, LONG, documents=2)
    activated(LONG)
    variants = [{"name": "styles", "changes": {"includestyles": True}}, {"name": "control"}]
    started = experiment_start(corpus="a", service="tex_to_html", name="exp", variants=variants, actor="t", send=False)
    job_run(started.pk)
    problems = []
    for args, shown in READS:
        argv = args.format(**pair).split(" ")
        result = ccs(*argv, COLUMNS=str(WIDTH))
        if result.returncode != 0:
            problems.append(f"ccs {args}: exit {result.returncode}: {result.stderr}")
            continue
        lines = result.stdout.splitlines()
        wide = [line for line in lines if len(line) > WIDTH]
        if wide:
            problems.append(f"ccs {args}: {len(wide)} line(s) wider than {WIDTH}: {wide[0]!r}")
        for text in shown:
            expected = text.format(url=live_server.url, **pair)
            if expected not in result.stdout:
                problems.append(f"ccs {args}: {expected!r} is missing:\n{result.stdout}")
        relative = [line for line in lines if re.search(r"(^|[\s:(])/(api|corpus)/", line)]
        if relative:
            problems.append(f"ccs {args}: a link as a path, not a URL: {relative[0]!r}")
        body, drawn = json.loads(ccs(*argv, "--json").stdout), len(table_rows(lines))
        if isinstance(body, list) and body and drawn != len(body):
            problems.append(f"ccs {args}: {len(body)} records drawn on {drawn} lines:\n{result.stdout}")
    assert not problems, "\n".join(problems)


def test_class_names_come_before_their_meaning(ccs, pair):
    result = ccs("classes", "a", "tex_to_html", COLUMNS=str(WIDTH))
    header = next(line for line in result.stdout.splitlines() if "meaning" in line)
    positions = [header.index(name) for name in ("severity", "category", "what", "meaning")]
    assert positions == sorted(positions), header


def test_a_record_s_link_longer_than_the_line_folds_whole_onto_the_next_never_cut(ccs, pair, live_server):
    narrow = 60  # a job's link (about 70 characters here) does not fit beside its key
    argv = ["job", pair["job"]]
    link = f"{live_server.url}{json.loads(ccs(*argv, '--json').stdout)['url']}"
    assert len(link) > narrow, link
    shown = ccs(*argv, COLUMNS=str(narrow)).stdout
    assert all(len(line) <= narrow for line in shown.splitlines()), shown
    assert link in re.sub(r"\s+", "", shown), shown  # folded whole, not cut with an ellipsis
