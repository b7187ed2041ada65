"""`ccs doctor`: the server's checks (reachable, token, version, the health checks of /api/health) and,
when ccs runs on the server's machine, that machine's: LaTeXML and its version, the bubblewrap sandbox,
the dispatcher's ports, free disk under the corpus roots, the results and the exports. One line per
check with a remediation; the exit code is 1 when any check is a problem (warnings pass)."""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cli.client import ApiError, Client, CliError
from cli.output import out
from cli.settings import Settings

OK, WARNING, PROBLEM = "ok", "warning", "problem"
LOW_FREE_BYTES = 1 << 30  # as the server's health checks: less than 1 GiB free is a warning
STYLE = {OK: "green", WARNING: "yellow", PROBLEM: "bold red"}


@dataclass
class Check:
    name: str
    status: str
    summary: str
    remediation: str | None = None


def ccs_version() -> str | None:
    try:
        return metadata.version("corpus-conversion-service")
    except metadata.PackageNotFoundError:
        return None


def on_this_machine(url: str) -> bool:
    """Whether the URL's host is this machine: a loopback address, or this host's own name or address."""
    host = urlsplit(url).hostname or ""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    own: set[str] = set()
    for name in (socket.gethostname(), socket.getfqdn()):
        with contextlib.suppress(OSError):
            own |= {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    return any(ipaddress.ip_address(address.split("%")[0]).is_loopback or address in own for address in addresses)


def server_checks(api: Client) -> tuple[list[Check], dict[str, Any] | None]:
    """Reachable, version, token, then each health check; the health body for the local checks."""
    # Which server: the URL and where it came from, first, so that a wrong stack is seen at once.
    checks: list[Check] = [Check("server", OK, api.settings.url_words)]
    url = api.settings.url
    try:
        index = api.json("GET", "/api")
    except CliError as exc:
        remedy = "Start the server (`make run`), or point CCS_URL / `ccs login --url` at the right one."
        return [*checks, Check("reachable", PROBLEM, str(exc), remedy)], None
    checks.append(Check("reachable", OK, f"{url} answers ({index.get('name')})"))
    server, mine = index.get("version"), ccs_version()
    if mine is None or server == mine:
        checks.append(Check("version", OK, f"server {server}" + (f", ccs {mine}" if mine else "")))
    else:
        checks.append(
            Check(
                "version",
                WARNING,
                f"server {server}, ccs {mine}",
                "Install ccs from the server's release (pip install of the same version).",
            )
        )
    if not api.settings.token:
        checks.append(
            Check(
                "token",
                PROBLEM,
                "no token: neither CCS_TOKEN nor a saved login",
                "Run `ccs login` (or set CCS_TOKEN) with a token from `manage.py create_token`.",
            )
        )
        return checks, None
    try:
        health = api.json("GET", "/api/health")
    except ApiError as exc:
        if exc.status in (401, 403, 429):
            checks.append(
                Check(
                    "token",
                    PROBLEM,
                    f"refused ({exc.status}): {exc.detail}",
                    "Run `ccs login` with a valid token (`manage.py create_token` makes one).",
                )
            )
            return checks, None
        raise
    checks.append(Check("token", OK, f"accepted (from {api.settings.source})"))
    for check in health["checks"]:
        checks.append(Check(f"health:{check['name']}", check["status"], check["summary"], check.get("remediation")))
    return checks, health


def _details(health: dict[str, Any], name: str) -> dict[str, Any]:
    return next((check.get("details") or {} for check in health["checks"] if check["name"] == name), {})


def _not_on_path(name: str, program: str, remedy: str) -> Check:
    return Check(name, PROBLEM, f"{program} is not on PATH", remedy)


def latexml_check() -> Check:
    executable = shutil.which("latexmlc")
    if executable is None:
        remedy = "Install LaTeXML (apt install latexml, or `scripts/system-packages`)."
        return _not_on_path("latexml", "latexmlc", remedy)
    try:
        result = subprocess.run([executable, "--VERSION"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("latexml", PROBLEM, f"{executable} does not run: {exc}", "Reinstall LaTeXML.")
    words = (result.stdout + result.stderr).strip().splitlines()
    if result.returncode != 0 or not words:
        return Check("latexml", PROBLEM, f"{executable} --VERSION exited {result.returncode}", "Reinstall LaTeXML.")
    return Check("latexml", OK, words[0])


def sandbox_check() -> Check:
    """bubblewrap runs a command in namespaces of its own, as the conversion sandbox does."""
    executable = shutil.which("bwrap")
    if executable is None:
        remedy = "Install bubblewrap (apt install bubblewrap), or turn the sandbox off (CONVERSION_SANDBOX=none)."
        return _not_on_path("sandbox", "bwrap", remedy)
    argv = [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
            "--die-with-parent", "true"]  # fmt: skip
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("sandbox", PROBLEM, f"bwrap cannot start: {exc}", "See docs/decisions/conversion-sandbox.md.")
    if result.returncode != 0:
        why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        return Check(
            "sandbox",
            PROBLEM,
            f"bwrap cannot make its namespaces: {why}",
            "Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or the "
            "AppArmor bwrap profile), or run the service where they are allowed.",
        )
    return Check("sandbox", OK, f"{executable} runs a command in its own namespaces")


def ports_check(health: dict[str, Any]) -> Check:
    details = _details(health, "dispatcher")
    host = details.get("host")
    ports = {name: details.get(f"{name}_port") for name in ("ventilator", "sink")}
    if not host or not all(ports.values()):
        return Check(
            "dispatcher ports", WARNING, "the server's health does not name the dispatcher's ports", "See `ccs health`."
        )
    closed = []
    for name, port in ports.items():
        try:
            with socket.create_connection((host, int(str(port))), timeout=2):
                pass
        except OSError:
            closed.append(f"{name} {host}:{port}")
    if closed:
        return Check(
            "dispatcher ports",
            PROBLEM,
            f"not accepting connections: {', '.join(closed)}",
            "Start the dispatcher (`make run` runs it, or `manage.py dispatcher`); check "
            "DISPATCHER_BIND and the firewall.",
        )
    return Check(
        "dispatcher ports", OK, f"ventilator {host}:{ports['ventilator']} and sink {host}:{ports['sink']} open"
    )


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_checks(health: dict[str, Any]) -> list[Check]:
    places = [(f"disk {root['path']}", root["path"]) for root in _details(health, "corpus_roots").get("roots", [])]
    for name in ("results_dir", "export_root"):
        path = _details(health, name).get("path")
        if path:
            places.append((f"disk {name}", path))
    checks = []
    for label, path in places:
        try:
            usage = shutil.disk_usage(_existing(Path(path)))
        except OSError as exc:
            checks.append(Check(label, PROBLEM, f"{path}: {exc.strerror}", "Mount the volume or fix the setting."))
            continue
        free = f"{usage.free / (1 << 30):.1f} GiB free under {path}"
        if usage.free < LOW_FREE_BYTES:
            checks.append(Check(label, WARNING, free, "Free space on that volume or move it to a larger one."))
        else:
            checks.append(Check(label, OK, free))
    return checks


def doctor_run(settings: Settings, local: bool | None) -> int:
    with Client(settings) as api:
        checks, health = server_checks(api)
    if local is None:
        local = on_this_machine(settings.url)
    if local:
        checks += [latexml_check(), sandbox_check()]
        if health is not None:
            checks += [ports_check(health), *disk_checks(health)]
    width = max(len(check.name) for check in checks)
    for check in checks:
        style = STYLE.get(check.status, "")
        line = f"[{style}]{check.status:<8}[/{style}] {check.name:<{width}}  {_escape(check.summary)}"
        if check.remediation and check.status != OK:
            line += f"  -> {_escape(check.remediation)}"
        out.print(line, soft_wrap=True)
    where = "the server and this machine" if local else "the server (not this machine: --local checks it too)"
    problems = sum(check.status == PROBLEM for check in checks)
    out.print(f"checked {where}: {problems} problem(s)")
    return 1 if problems else 0


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
