"""ccs covers the whole API: every operation of the OpenAPI document has a ccs command, and the commands
outside the table (the streamed downloads, convert) answer what the API answers."""

from __future__ import annotations

import json

import pytest

from corpora.models import Task
from corpora.results import result_file, result_file_write
from tests.dispatcher.harness import result_zip

pytestmark = pytest.mark.django_db(transaction=True)

# Every operation of /api/openapi.json and the ccs command that makes it.
COMMANDS = {
    "GET /api": "doctor",
    "GET /api/audit": "audit",
    "GET /api/compare/{corpus}/{service_a}/{service_b}": "compare",
    "GET /api/compare/{corpus}/{service_a}/{service_b}/tasks": "compare-tasks",
    "GET /api/config": "config",
    "PUT /api/config": "config set",
    "POST /api/conversions/pause": "pause",
    "POST /api/conversions/resume": "resume",
    "GET /api/corpora": "corpora",
    "POST /api/corpora": "import",
    "POST /api/corpora/{corpus}/services/{service}": "activate",
    "DELETE /api/corpora/{corpus}/services/{service}": "deactivate",
    "POST /api/corpora/{corpus}/services/{service}/export-dataset": "export",
    "POST /api/corpora/{corpus}/services/{service}/snapshot": "snapshot",
    "GET /api/corpora/{name}": "corpus",
    "DELETE /api/corpora/{name}": "delete corpus",
    "POST /api/corpora/{name}/extend": "extend",
    "POST /api/corpora/{parent}/sandbox": "sandbox",
    "GET /api/corpus/{corpus}/{service}/document/{name}": "document",
    "GET /api/corpus/{corpus}/{service}/document/{name}/history": "history",
    "GET /api/corpus/{corpus}/{service}/document/{name}/html": "paper",
    "GET /api/corpus/{corpus}/{service}/document/{name}/files/{member}": "paper",
    "GET /api/corpora/{corpus}/services/{service}/documents": "documents",
    "GET /api/dashboard": "dashboard",
    "GET /api/exports": "exports",
    "GET /api/experiments": "experiments",
    "POST /api/experiments": "experiment start",
    "GET /api/experiments/{name}": "experiment show",
    "GET /api/exports/{out}/{name}": "download",
    "GET /api/health": "health",
    "GET /api/jobs": "jobs",
    "GET /api/jobs/{uuid}": "job",
    "GET /api/logs": "logs",
    "POST /api/maintenance/analyze": "analyze",
    "POST /api/maintenance/reindex": "reindex",
    "POST /api/reports/refresh": "refresh",
    "GET /api/reports/{corpus}/{service}": "report",
    "GET /api/reports/{corpus}/{service}/messages": "messages",
    "POST /api/reports/{corpus}/{service}/pause": "pause",
    "POST /api/reports/{corpus}/{service}/refresh": "refresh",
    "POST /api/reports/{corpus}/{service}/rerun": "rerun",
    "POST /api/reports/{corpus}/{service}/resume": "resume",
    "GET /api/reports/{corpus}/{service}/{severity}": "report",
    "GET /api/reports/{corpus}/{service}/{severity}/{category}": "report",
    "GET /api/reports/{corpus}/{service}/{severity}/{category}/{what}": "report",
    "GET /api/runs": "runs",
    "GET /api/runs/{corpus}/{service}": "runs",
    "GET /api/runs/{corpus}/{service}/classes": "classes",
    "GET /api/runs/{corpus}/{service}/packages": "packages",
    "GET /api/runs/{corpus}/{service}/packages/diff": "package-diff",
    "GET /api/runs/{corpus}/{service}/packages/export": "package-export",
    "GET /api/runs/{corpus}/{service}/packages/{kind}/{package}": "package-papers",
    "GET /api/runs/{corpus}/{service}/classes/{severity}/{rest}/tasks": "class-tasks",
    "GET /api/runs/{corpus}/{service}/current": "run",
    "GET /api/runs/{corpus}/{service}/diff": "diff",
    "GET /api/runs/{corpus}/{service}/tasks": "tasks",
    "GET /api/runs/{corpus}/{service}/telemetry": "telemetry",
    "GET /api/runs/{corpus}/{service}/cost": "cost",
    "GET /api/services": "services",
    "POST /api/services": "register",
    "GET /api/services/{service}": "service",
    "DELETE /api/services/{service}": "delete service",
    "PUT /api/services/{service}/lease": "lease",
    "GET /api/services/{service}/runtimes": "runtimes",
    "GET /api/services/{service}/workers": "workers",
    "GET /api/sessions": "sessions",
    "DELETE /api/sessions/{id}": "delete session",
    "PUT /api/services/{service}/profile": "profile",
    "GET /api/profiles": "profiles",
    "GET /api/passkeys": "passkeys",
    "PATCH /api/passkeys/{id}": "rename-passkey",
    "DELETE /api/passkeys/{id}": "delete passkey",
    "GET /api/statistics": "statistics",
    "GET /api/status": "status",
    "POST /convert": "convert",
}
# The document itself, its viewer and the load balancer's probe are not operator commands.
NOT_COMMANDS = {"GET /api/openapi.json", "GET /api/docs", "GET /healthz"}


def test_every_operation_of_the_api_has_a_command(client):
    from typer.main import get_command

    from cli.main import app

    document = client.get("/api/openapi.json").json()
    operations = {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert operations - NOT_COMMANDS == set(COMMANDS)
    group = get_command(app)
    for name in set(COMMANDS.values()):
        command = group
        for word in name.split():
            command = command.commands[word]  # a KeyError names a command that does not exist


@pytest.mark.slow
def test_messages_stream_the_apis_bytes(ccs, http, pair, tmp_path):
    result = ccs("messages", "a", "tex_to_html", "--severity", "warning", "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    answer = http.get("/api/reports/a/tex_to_html/messages", params={"severity": "warning", "format": "jsonl"})
    assert result.stdout == answer.text and "missing_file" in result.stdout
    target = tmp_path / "all.csv"
    assert ccs("messages", "a", "tex_to_html", "-o", str(target)).returncode == 0
    assert target.read_bytes() == http.get("/api/reports/a/tex_to_html/messages").content
    missing = ccs("download", "nothing", "manifest.json", "-o", str(tmp_path / "m.json"))
    assert missing.returncode == 1 and "Not found (404)" in missing.stderr
    assert not (tmp_path / "m.json").exists()


@pytest.mark.slow
def test_paper_streams_the_apis_bytes(ccs, http, pair, settings, tmp_path):
    settings.RESULTS_DIR = tmp_path / "results"
    task = Task.objects.get(corpus__name="a", service__name="tex_to_html", document__name="doc1")
    files = {"paper.html": b"<!DOCTYPE html><p>read me</p>", "fig/x.png": b"\x89PNG\r\n\x1a\n"}
    result_file_write(result_file(settings.RESULTS_DIR, task.corpus_id, task.service_id, task.pk),
                      result_zip("Status:conversion:0\n", files))  # fmt: skip
    base = "/api/corpus/a/tex_to_html/document/doc1"
    html = ccs("paper", "a", "tex_to_html", "doc1")
    assert html.returncode == 0, html.stderr
    assert html.stdout.encode() == http.get(f"{base}/files/paper.html").content == files["paper.html"]
    target = tmp_path / "x.png"
    assert ccs("paper", "a", "tex_to_html", "doc1", "fig/x.png", "-o", str(target)).returncode == 0
    assert target.read_bytes() == http.get(f"{base}/files/fig/x.png").content == files["fig/x.png"]
    missing = ccs("paper", "a", "tex_to_html", "doc2", "-o", str(tmp_path / "none.html"))
    assert missing.returncode == 1 and "Not found (404)" in missing.stderr and "No stored result" in missing.stderr
    assert not (tmp_path / "none.html").exists()


@pytest.mark.slow
def test_convert_answers_what_the_api_answers(ccs, http):
    formula = "a^2+b^2=c^2"
    result = ccs("convert", "-", "--whatsin", "math", "--whatsout", "math", "--json", stdin=formula)
    assert result.returncode == 0, result.stderr
    answer = http.post("/convert", data={"tex": formula, "whatsin": "math", "whatsout": "math"}).json()
    ours = json.loads(result.stdout)
    assert (ours["result"], ours["status"]) == (answer["result"], answer["status"])
    assert "<math" in ours["result"]
    plain = ccs("convert", "-", "--whatsin", "math", "--whatsout", "math", stdin=formula)
    assert plain.stdout.strip() == answer["result"].strip() and f"status: {answer['status']}" in plain.stderr
