"""ccs's writes: without --yes each prints its plan and changes nothing (the database, the journal
included, is the same after); with --yes each does what its endpoint does. Errors from the server are
its problem's title and detail with exit 1, usage errors exit 2, never a traceback."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from django.apps import apps
from django.urls import resolve

from accounts.models import AuditEntry, Passkey
from corpora.models import Activation, Corpus, Snapshot, Task
from jobs.models import Job
from ops.models import ConfigOverride
from services.models import Service
from tests.cli.test_coverage import COMMANDS
from tests.support import free_port

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT_APPS = {"accounts", "corpora", "jobs", "ops", "reports", "runs", "services", "dispatcher"}

# Every write with arguments that fit the `pair` fixture's data.
WRITES: list[str] = [
    "import b {root}/b --description two",
    "extend a",
    "register s2 --version 1 --description new",
    "lease tex_to_html 60",
    "profile tex_to_html --preset arxiv --preload [ids]latexml.sty --includestyles --timeout-seconds 600",
    "activate a s2",
    "deactivate a next",
    "delete corpus a",
    "delete service next",
    "delete session 1",
    "delete passkey {passkey}",
    "rename-passkey {passkey} phone",
    "rerun a tex_to_html warning missing_file --description again",
    "pause a tex_to_html",
    "pause",
    "resume a tex_to_html",
    "resume",
    "snapshot a tex_to_html",
    "sandbox a sb --service tex_to_html --severity warning",
    'experiment start a tex_to_html --name e1 --variants-json [{{"name":"styles","changes":{{"includestyles":true}}}}]',
    "export a tex_to_html --group-by none --severity warning --severity error",
    "config set jobs.stall_seconds 77",
    "refresh a tex_to_html",
    "refresh",
    "reindex",
    "analyze",
]


def state() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table of the project's apps."""
    rows = {}
    for model in apps.get_models():
        if model._meta.app_label in PROJECT_APPS and model._meta.managed:
            rows[model._meta.label] = [repr(row) for row in model.objects.order_by("pk").values()]
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("args", WRITES, ids=[" ".join(w.split()[:2]) for w in WRITES])
def test_a_write_without_yes_prints_its_plan_and_changes_nothing(ccs, pair, corpus_root, args):
    (corpus_root / "b").mkdir()
    before = state()
    journal = AuditEntry.objects.count()
    result = ccs(*args.format(root=corpus_root, **pair).split(" "))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Plan: ") and "Dry run: nothing was changed" in result.stdout
    assert state() == before
    assert AuditEntry.objects.count() == journal
    # ccs spells its paths itself (it has no Django to reverse the routes): the one it would send must be
    # the route of an operation that this command makes (tests/cli/test_coverage.py).
    method, url = result.stdout.splitlines()[1].split()
    route = "/" + re.sub(r"<[^>]+>", "{}", resolve(unquote(urlsplit(url).path)).route)
    words = args.split()
    name = " ".join(words[:2]) if " ".join(words[:2]) in COMMANDS.values() else words[0]
    operations = {op.split()[1] for op, command in COMMANDS.items() if command == name and op.split()[0] == method}
    assert route in {re.sub(r"\{[^}]+\}", "{}", path) for path in operations}, (method, route, name)


def test_every_write_of_the_table_has_a_dry_run_test():
    from cli.spec import WRITES as COMMANDS

    names = {f"{c.group} {c.name}" if c.group else c.name for c in COMMANDS}
    groups = ("delete", "config", "experiment")
    tested = {" ".join(w.split()[:2]) if w.split()[0] in groups else w.split()[0] for w in WRITES}
    assert names == tested


def _ok(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


@pytest.mark.slow
def test_writes_with_yes_do_what_their_endpoints_do(ccs, pair, corpus_root, live_server):
    printed = _ok(ccs("register", "s2", "--version", "1", "--yes"))
    assert re.search(rf"^url +{re.escape(live_server.url)}/api/services/s2\b", printed, re.M), printed  # a full URL
    assert Service.objects.filter(name="s2", version="1").exists()
    assert AuditEntry.objects.filter(actor="tester", outcome="ok").count() >= 1

    answer = json.loads(_ok(ccs(
        "profile", "s2", "--preset", "arxiv", "--preload", "[ids]latexml.sty", "--includestyles",
        "--timeout-seconds", "600", "--yes", "--json",
    )))  # fmt: skip
    stored = Service.objects.get(name="s2").profile
    assert answer["profile"] == stored and answer["profile_preset"] is None
    assert (stored["preloads"], stored["includestyles"], stored["timeout_seconds"]) == (["[ids]latexml.sty"], True, 600)
    assert stored["pmml"] is stored["nodefaultresources"] is True  # the preset's, under the options given
    _ok(ccs("profile", "s2", "--preset", "default", "--yes"))
    assert Service.objects.get(name="s2").profile == json.loads(_ok(ccs("profiles", "--json")))[0]["profile"]
    _ok(ccs("register", "s3", "--profile", "arxiv", "--yes"))
    assert Service.objects.get(name="s3").profile["cmml"] is True

    answer = json.loads(_ok(ccs("lease", "s2", "120", "--yes", "--json")))
    assert answer["lease_seconds"] == 120 == Service.objects.get(name="s2").lease_seconds
    _ok(ccs("lease", "s2", "--clear", "--yes"))
    assert Service.objects.get(name="s2").lease_seconds is None

    _ok(ccs("config", "set", "jobs.stall_seconds", "77", "--yes"))
    assert ConfigOverride.objects.get(key="jobs.stall_seconds").value == 77

    snapshots = Snapshot.objects.count()
    _ok(ccs("snapshot", "a", "tex_to_html", "--yes"))
    assert Snapshot.objects.count() == snapshots + 1

    answer = json.loads(_ok(ccs("rerun", "a", "tex_to_html", "warning", "--yes", "--json")))
    assert answer["severity"] == "warning" and answer["tasks"] >= 1
    assert Task.objects.filter(corpus__name="a", service__name="tex_to_html", status=0).count() == answer["tasks"]

    paused = json.loads(_ok(ccs("pause", "a", "tex_to_html", "--yes", "--json")))
    assert paused["action"] == "pause" and paused["blocked"] == answer["tasks"]
    resumed = json.loads(_ok(ccs("resume", "--yes", "--json")))
    assert resumed["corpus"] is None and resumed["resumed"] == answer["tasks"]

    (corpus_root / "b").mkdir()
    (corpus_root / "b" / "x.tex").write_text("\\documentclass{article}\\begin{document}x\\end{document}\n")
    out = _ok(ccs("import", "b", str(corpus_root / "b"), "--yes"))
    job = Job.objects.get(kind="corpus_import", params__name="b")
    assert f"ccs job {job.uuid} --wait" in out  # no worker runs here: the job waits in the queue

    renamed = json.loads(_ok(ccs("rename-passkey", pair["passkey"], "phone", "--yes", "--json")))
    assert renamed["name"] == "phone" == Passkey.objects.get(pk=pair["passkey"]).name
    _ok(ccs("delete", "passkey", pair["passkey"], "--yes"))
    assert Passkey.objects.get(pk=pair["passkey"]).revoked_at is not None
    assert ccs("passkeys", "--json").stdout.strip() == "[]"

    _ok(ccs("deactivate", "a", "next", "--yes"))
    assert not Activation.objects.filter(corpus__name="a", service__name="next").exists()
    _ok(ccs("delete", "service", "s2", "--yes"))
    assert not Service.objects.filter(name="s2").exists()
    _ok(ccs("delete", "corpus", "a", "--yes"))
    assert not Corpus.objects.filter(name="a").exists()


@pytest.mark.slow
def test_a_server_error_prints_the_problems_title_and_detail_and_exits_1(ccs, pair):
    for args in (["corpus", "nope"], ["delete", "corpus", "nope", "--yes"], ["report", "a", "tex_to_html", "bogus"]):
        result = ccs(*args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == ""
        assert any(line.startswith("ccs: ") for line in result.stderr.splitlines()), result.stderr
    bogus = ccs("report", "a", "tex_to_html", "bogus")
    assert "ccs: Bad request (400): Unknown severity 'bogus'" in bogus.stderr and '"severity"' in bogus.stderr
    missing = ccs("corpus", "nope")
    assert "Not found (404): " in missing.stderr and "nope" in missing.stderr
    refused = ccs("jobs", CCS_TOKEN="not-the-token")
    assert refused.returncode == 1 and "Not authenticated (401): " in refused.stderr
    unreachable = ccs("status", CCS_URL=f"http://127.0.0.1:{free_port()}")
    assert unreachable.returncode == 1 and "Traceback" not in unreachable.stderr
    assert (
        unreachable.stderr.startswith("ccs: cannot reach http://127.0.0.1:")
        and len(unreachable.stderr.splitlines()) == 1
    )


@pytest.mark.slow
def test_usage_errors_exit_2(ccs):
    for args in (["report", "a"], ["pause", "a"], ["lease", "s"], ["lease", "s", "5", "--clear"], ["nosuch"],
                 ["jobs", "--limit", "many"], ["login", "--token", "x"]):  # fmt: skip
        result = ccs(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
