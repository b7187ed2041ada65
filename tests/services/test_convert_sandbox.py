"""POST /convert runs latexmlc in the sandbox: the requests of the attack return no file of the server
(real LaTeXML, real bwrap); an unusable sandbox is a 503 with the reason; the health check (GET /api/health) shows
the mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import PASSWD_LINE, plant

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
# convert_text works in work/ of a fresh temporary directory, /tmp/cortex-text-XXXX/work: the relative
# attacks are written from a directory of the same depth.
WORK_GUESS = Path("/tmp/cortex-text-unknown/work")


def _text(body: dict) -> str:
    return body["result"] + "\n" + body["log"]


@pytest.mark.slow
def test_the_reported_requests_return_no_file_of_the_server(api, settings):
    passwd = (
        "\\documentclass{article}\\usepackage{verbatim}\\begin{document}\\verbatiminput{/etc/passwd}\\end{document}"
    )
    body = api.post("/convert", {"tex": passwd}).json()
    assert body["status"] == "error" and PASSWD_LINE not in _text(body)
    key = (settings.VAR_DIR / "secret_key").read_text().strip()
    for path in ("var/secret_key", str(settings.VAR_DIR / "secret_key"), "../" * 12 + "etc/passwd"):
        body = api.post("/convert", {"tex": f"\\documentclass{{article}}\\begin{{document}}\\input{{{path}}}"
                                            "\\end{document}"}).json()  # fmt: skip
        assert body["status_code"] == 2 and f"Error:missing_file:{path}" in body["log"], path
        assert key not in _text(body) and PASSWD_LINE not in _text(body), path


@pytest.mark.slow
def test_no_attack_reads_a_planted_file_through_convert_but_all_do_without_the_sandbox(api, settings, tmp_path):
    with plant(tmp_path / "outside", WORK_GUESS) as planted:
        sandboxed = api.post("/convert", {"tex": planted.document})
        settings.CONVERSION_SANDBOX = "none"
        unsandboxed = api.post("/convert", {"tex": planted.document})
    assert sandboxed.status_code == 200 and unsandboxed.status_code == 200
    assert "Start." in sandboxed.json()["result"] and "End." in sandboxed.json()["result"]
    assert planted.leaked(_text(sandboxed.json())) == []
    assert PASSWD_LINE not in _text(sandboxed.json())
    # The control: the same request reads every planted file unsandboxed.
    assert planted.leaked(_text(unsandboxed.json())) == sorted(planted.markers)
    assert PASSWD_LINE in _text(unsandboxed.json())


def test_an_unusable_sandbox_is_a_503_problem_with_the_reason(api, settings, tmp_path):
    settings.CONVERSION_BWRAP = str(tmp_path / "no-bwrap")
    response = api.post("/convert", {"tex": "\\documentclass{article}\\begin{document}x\\end{document}"})
    assert response.status_code == 503 and response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["detail"].startswith("the conversion sandbox cannot start: ")
    assert "no-bwrap is not installed" in body["detail"] and body["status_code"] == 3


def test_the_health_check_shows_whether_conversions_run_sandboxed(authed, settings, tmp_path):
    def sandbox_check() -> dict:
        body = authed.get("/api/health").json()
        return next(check for check in body["checks"] if check["name"] == "conversion_sandbox")

    check = sandbox_check()
    details = {"mode": "bwrap", "proc": "mount", "state": "ok"}
    assert (check["status"], check["details"], check["remediation"]) == ("ok", details, None)
    settings.CONVERSION_SANDBOX_PROC = "none"  # as in a container (docs/decisions/container-sandbox.md)
    check = sandbox_check()
    assert (check["status"], check["details"]["proc"]) == ("ok", "none")
    assert check["summary"] == "conversions run confined in bwrap, without /proc"
    settings.CONVERSION_SANDBOX_PROC = "mount"
    settings.CONVERSION_BWRAP = str(tmp_path / "no-bwrap")
    check = sandbox_check()
    assert (check["status"], check["details"]["state"]) == ("problem", "unavailable")
    assert "no-bwrap is not installed" in check["summary"] and "apt-get install bubblewrap" in check["remediation"]
    settings.CONVERSION_SANDBOX = "none"
    check = sandbox_check()
    assert (check["status"], check["details"]["state"]) == ("warning", "none")
    assert "CONVERSION_SANDBOX" in check["remediation"]
