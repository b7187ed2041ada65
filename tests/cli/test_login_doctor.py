"""ccs login (the config file, mode 0600; the token from stdin, never from argv), ccs doctor (a line per
check, exit 1 on a problem) and shell completion for bash and zsh."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from jobs.models import Job
from tests.cli.conftest import CCS, ccs_env
from tests.support import free_port, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = Path("config") / "ccs" / "config.json"


def _login(live_server, home: Path, token: str, *extra: str) -> subprocess.CompletedProcess:
    """`ccs login` with the token on stdin, under umask 000: the file must be 0600 whatever the umask."""
    return subprocess.run(
        [str(CCS), "login", "--url", live_server.url, *extra], input=token + "\n", capture_output=True, text=True,
        env=ccs_env(home), timeout=60, check=False, preexec_fn=lambda: os.umask(0),
    )  # fmt: skip


@pytest.mark.slow
def test_login_writes_a_0600_config_file_that_later_commands_use(live_server, ccs_home, token):
    result = _login(live_server, ccs_home, token)
    assert result.returncode == 0, result.stderr
    path = ccs_home / CONFIG
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"url": live_server.url, "token": token}
    assert token not in result.stdout + result.stderr

    later = subprocess.run(
        [str(CCS), "jobs", "--json"], capture_output=True, text=True, env=ccs_env(ccs_home), timeout=60, check=False
    )
    assert later.returncode == 0, later.stderr
    assert (
        json.loads(later.stdout) == httpx.get(f"{live_server.url}/api/jobs", headers={"X-Service-Token": token}).json()
    )


@pytest.mark.slow
def test_login_refuses_a_wrong_token_and_saves_nothing(live_server, ccs_home, token):
    result = _login(live_server, ccs_home, "not-" + token)
    assert result.returncode == 1
    assert "Not authenticated (401)" in result.stderr and token not in result.stderr
    assert not (ccs_home / CONFIG).exists()


@pytest.mark.slow
def test_the_token_is_in_no_process_listing(live_server, ccs_home, token):
    """A ccs that runs for a while (following a job no worker takes) shows no token in its argv or `ps`."""
    assert _login(live_server, ccs_home, token).returncode == 0
    job = Job.objects.create(kind="test_count", actor="tester")
    follower = subprocess.Popen(
        [str(CCS), "job", str(job.uuid), "--wait"], env=ccs_env(ccs_home),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # It has read its token and used it once it has touched the token's last use.
        from accounts.models import ApiToken

        wait_until(lambda: ApiToken.objects.filter(last_used_at__isnull=False).exists(), 30, message="a request")
        cmdline = Path(f"/proc/{follower.pid}/cmdline").read_bytes()
        listing = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
        assert follower.poll() is None
        assert str(job.uuid).encode() in cmdline and token.encode() not in cmdline
        assert f"ccs job {job.uuid}" in listing and token not in listing
    finally:
        follower.kill()
        follower.wait(10)


@pytest.mark.slow
def test_doctor_reports_a_wrong_token_as_a_problem(ccs):
    result = ccs("doctor", "--remote", CCS_TOKEN="not-the-token")
    assert result.returncode == 1, result.stdout
    lines = result.stdout.splitlines()
    assert any(line.split()[:2] == ["ok", "reachable"] for line in lines), result.stdout
    token_line = next(line for line in lines if line.split()[1:2] == ["token"])
    assert token_line.startswith("problem") and "ccs login" in token_line


@pytest.mark.slow
def test_doctor_checks_the_server_and_this_machine(ccs, http, token):
    result = ccs("doctor")  # the live server is on localhost: this machine is the server's
    health = http.get("/api/health").json()
    problems = [check["name"] for check in health["checks"] if check["status"] == "problem"]
    assert result.returncode == (1 if problems else 0), result.stdout
    lines = {line.split()[1]: line for line in result.stdout.splitlines()[:-1]}
    for name in ("reachable", "version", "token", "latexml", "sandbox", "dispatcher"):
        assert name in lines, (name, result.stdout)
    assert lines["token"].startswith("ok") and lines["latexml"].startswith("ok") and "LaTeXML" in lines["latexml"]
    for check in health["checks"]:
        line = lines[f"health:{check['name']}"]
        assert line.startswith(check["status"])
        if check["status"] != "ok":
            assert check["remediation"] in line
    assert any(name.startswith("disk") for name in lines)
    assert token not in result.stdout + result.stderr
    remote = ccs("doctor", "--remote")
    remote_names = {line.split()[1] for line in remote.stdout.splitlines()[:-1]}  # a check's summary may say latexmlc
    assert "latexml" not in remote_names and "health:jobs" in remote_names


@pytest.mark.slow
def test_doctor_says_when_the_server_cannot_be_reached(ccs):
    url = f"http://127.0.0.1:{free_port()}"
    result = ccs("doctor", CCS_URL=url)
    assert result.returncode == 1
    server, reachable = result.stdout.splitlines()[:2]
    assert server.split() == ["ok", "server", url, "(from", "$CCS_URL)"], result.stdout
    assert reachable.startswith("problem  reachable") and "CCS_URL" in reachable
    status = ccs("status", CCS_URL=url)  # a read that cannot reach its server names it, and whence it came
    assert status.returncode == 1 and status.stderr.startswith(f"ccs: cannot reach {url} (from $CCS_URL): "), status


@pytest.mark.slow
def test_completion_scripts_for_bash_and_zsh(ccs_home):
    def run(*args: str, **env: str) -> str:
        result = subprocess.run(
            [str(CCS), *args], capture_output=True, text=True, env=ccs_env(ccs_home, **env), timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    bash = run("completion", "bash")
    assert "complete -o default -F _ccs_completion ccs" in bash
    assert "#compdef ccs" in run("completion", "zsh")
    # The bash script, sourced, completes command names through ccs itself.
    script = f'{bash}\nCOMP_WORDS=(ccs cor); COMP_CWORD=1; _ccs_completion ccs; printf "%s\\n" "${{COMPREPLY[@]}}"'
    env = ccs_env(ccs_home, PATH=f"{CCS.parent}:{os.environ['PATH']}")
    completed = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60, check=True)
    assert completed.stdout.split() == ["corpora", "corpus"]
    # What the zsh script asks ccs for: the subcommands of `delete`.
    zsh = run(_CCS_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="ccs delete ")
    assert all(name in zsh for name in ('"corpus"', '"service"', '"session"'))


@pytest.mark.slow
def test_status_and_doctor_say_which_server_answered_and_whence(live_server, ccs_home, token):
    """The URL from the saved login, then from nothing at all: the default, said as such."""
    assert _login(live_server, ccs_home, token).returncode == 0
    status = subprocess.run([str(CCS), "status"], capture_output=True, text=True, env=ccs_env(ccs_home), check=False)
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[0].split() == ["server", live_server.url, "(from", f"{ccs_home / CONFIG})"]
    (ccs_home / CONFIG).unlink()
    doctor = subprocess.run(
        [str(CCS), "doctor", "--remote"], capture_output=True, text=True, env=ccs_env(ccs_home), timeout=60,
        check=False,
    )  # fmt: skip
    first = doctor.stdout.splitlines()[0]
    assert first.split()[:5] == ["ok", "server", "http://127.0.0.1:8000", "(the", "default:"], first
