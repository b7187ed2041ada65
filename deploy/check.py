"""`make deploy-check`: the deployment built and run for real (docs/deploy.md).

1. A Docker engine: `docker info` answers, or Debian's docker.io and docker-compose are installed (as
   root or through sudo) and `dockerd` is started here, and stopped at the end.
2. The upstream images the Dockerfile and docker-compose.yml name: present, pulled, or, where no registry
   answers, built as stand-ins under the same tags (debian:bookworm-slim by debootstrap from the Debian
   mirror; postgres and redis from Debian's packages, deploy/docker/standins). A stand-in base trusts the
   CA certificates of this machine, added at build time, so that pip reaches PyPI through this
   machine's proxy; nothing of them is kept in the repository.
3. The project's image, built by `docker-compose build`, and the compose stack brought up under a project
   name of its own, on free host ports.
4. A few real papers copied into the corpora volume, then, through the API (the `ccs` command line):
   imported, the service registered and activated, and converted by the sandboxed LaTeXML workers.
5. Each paper's status compared with the same conversion outside Docker (conversion.worker.convert_task:
   the worker's own path, the same profile and limits), run here meanwhile.
6. /healthz, GET /api/health (the sandbox check among them) and /metrics.
7. `docker-compose down` and `up` again: the reports, the results and the token are still there.
8. Everything it made removed: containers, networks, volumes, the images it built, the engine it started.

Run: make deploy-check [ARGS="--paper NAME.tar.gz ... --keep"]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from conversion import engine, profiles  # noqa: E402
from conversion.archive import inspect_entry, pack_entry  # noqa: E402
from conversion.choices import COMPLETED_NAMES  # noqa: E402
from conversion.logparse import parse_log  # noqa: E402
from conversion.worker import convert_task  # noqa: E402

REAL_CORPUS = PROJECT.parent / "shared" / "corpora" / "real"
# Papers that end well inside the timeout, so that their status does not hang on the machine's load: an
# error, one with figures (ImageMagick and Ghostscript in the sandbox), a fatal one and a warning.
PAPERS = (
    "adrn-barchaos.tar.gz",
    "glouppe-paper-author-disambiguation.tar.gz",
    "clef-men-article-zoo-itp.tar.gz",
    "cderici-linklets-redex-model.tar.gz",
)
COMPOSE_PROJECT = "ccsdeploycheck"
IMAGE = "corpus-conversion-service:deploy-check"
SERVICE = "tex_to_html"
PROFILE = "arxiv"  # the converter profile of the service (with the shipped bindings), and of those outside Docker
CORPUS = "real"
# What the compose workers run with (docker-compose.yml, latexml-worker): the same limits outside.
WORKER_TIMEOUT = 300
WORKER_MEMORY_MB = 4096
STANDINS = PROJECT / "deploy" / "docker" / "standins"
# Journal classes of TeX Live's publishers collection, which the workers must find (kpsewhich) in the image.
CLASSES = ("revtex4-2.cls", "aastex631.cls", "jmlr.cls")
BASE = "debian:bookworm-slim"
# The upstream images, in the order they are needed (the stand-ins build on the base).
UPSTREAM = (BASE, "postgres:15-bookworm", "redis:7-bookworm")
DEBIAN_MIRROR = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
DOCKER_SOCKET = Path("/var/run/docker.sock")
LOG_DIR = PROJECT / "var" / "deploy-check"


class CheckFailed(Exception):
    """A step of the check did not do what it should; the message says which and why."""


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(argv: list[str], *, env: dict | None = None, log: Path | None = None, input: bytes | None = None,
        timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:  # fmt: skip
    """Run a command; with `log` its output goes there (the tail is shown when it fails), otherwise it is
    captured."""
    full_env = {**os.environ, **(env or {})}
    if log is None:
        result = subprocess.run(argv, env=full_env, input=input, capture_output=True, timeout=timeout, check=False)
        output = result.stdout + result.stderr
    else:
        with log.open("ab") as out:
            result = subprocess.run(
                argv, env=full_env, input=input, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
            )
        output = log.read_bytes()[-3000:]
    if check and result.returncode != 0:
        tail = output.decode(errors="replace")[-3000:]
        raise CheckFailed(f"{' '.join(argv)} exited with {result.returncode}:\n{tail}")
    return result


def as_root(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return argv
    if shutil.which("sudo"):
        return ["sudo", *argv]
    raise CheckFailed(f"{argv[0]} needs root: run as root, or install sudo")


def apt_install(packages: list[str]) -> None:
    say(f"installing {' '.join(packages)} from Debian's packages")
    run(as_root(["apt-get", "update", "-qq"]), log=LOG_DIR / "apt.log")
    run(
        as_root(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "--no-install-recommends",
                 *packages]),
        log=LOG_DIR / "apt.log",
    )  # fmt: skip


# --- the engine ------------------------------------------------------------------------------------


def docker_info() -> subprocess.CompletedProcess:
    return run(["docker", "info"], check=False, timeout=30)


def docker_answers() -> bool:
    return docker_info().returncode == 0


def engine_start() -> subprocess.Popen | None:
    """A Docker engine that answers: the running one (None), or one started here (its process)."""
    info = docker_info() if shutil.which("docker") else None
    if info is not None and info.returncode == 0:
        return None
    if DOCKER_SOCKET.exists() and info is not None:
        why = info.stderr.decode(errors="replace").strip()
        raise CheckFailed(f"{DOCKER_SOCKET} exists but the Docker engine does not answer ({why[-300:]}): start"
                          " dockerd, or run as root or as a member of the docker group")  # fmt: skip
    missing = [package for package, command in (("docker.io", "dockerd"), ("docker-compose", "docker-compose"))
               if not shutil.which(command)]  # fmt: skip
    if missing:
        apt_install(missing)
    say("starting dockerd (its log: var/deploy-check/dockerd.log)")
    log = (LOG_DIR / "dockerd.log").open("ab")
    process = subprocess.Popen(as_root(["dockerd"]), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if docker_answers():
            return process
        if process.poll() is not None:
            raise CheckFailed(f"dockerd exited with {process.returncode}: see var/deploy-check/dockerd.log")
        time.sleep(1)
    raise CheckFailed("dockerd did not answer within 60 s: see var/deploy-check/dockerd.log")


def engine_stop(process: subprocess.Popen | None) -> None:
    if process is None:
        return
    say("stopping the dockerd started here")
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if run(["docker", "compose", "version"], check=False).returncode == 0:
        return ["docker", "compose"]
    apt_install(["docker-compose"])
    return ["docker-compose"]


# --- images ----------------------------------------------------------------------------------------


def image_present(tag: str) -> bool:
    return run(["docker", "image", "inspect", tag], check=False).returncode == 0


def base_standin(tag: str) -> None:
    """debian:bookworm-slim from the Debian mirror (debootstrap's minbase), trusting this machine's CAs."""
    if not shutil.which("debootstrap"):
        apt_install(["debootstrap"])
    with tempfile.TemporaryDirectory(prefix="ccs-deploy-base-") as scratch:
        root = Path(scratch) / "root"
        say(f"building {tag} by debootstrap from {DEBIAN_MIRROR} (about a minute)")
        run(as_root(["debootstrap", "--variant=minbase", "bookworm", str(root), DEBIAN_MIRROR]),
            log=LOG_DIR / "debootstrap.log")  # fmt: skip
        if HOST_CA.is_file():
            # update-ca-certificates, run when the image installs ca-certificates, adds it to the bundle.
            extra = root / "usr/local/share/ca-certificates"
            extra.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(HOST_CA, extra / "deploy-check-host.crt")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (root / cache).glob("*"):
                if item.is_file():
                    item.unlink()
        tar = subprocess.Popen(as_root(["tar", "-C", str(root), "-c", "."]), stdout=subprocess.PIPE)
        imported = subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True, check=False)
        tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise CheckFailed(f"docker import of {tag} failed: {imported.stderr.decode(errors='replace')}")
        run(as_root(["rm", "-rf", str(root)]))


def upstream_images(built: list[str]) -> None:
    """Each upstream image present, pulled or built as a stand-in; the tags built here are added to `built`, to
    remove at the end."""
    for tag in UPSTREAM:
        if image_present(tag):
            say(f"{tag}: present")
            continue
        try:
            pulled = run(["docker", "pull", tag], check=False, timeout=180)
        except subprocess.TimeoutExpired:
            pulled = subprocess.CompletedProcess([], 1, b"", b"no answer within 180 s")
        if pulled.returncode == 0:
            say(f"{tag}: pulled")
            continue
        why = (pulled.stdout + pulled.stderr).decode(errors="replace").strip().splitlines()[-1:]
        say(f"{tag}: cannot be pulled ({' '.join(why)}); building a stand-in")
        if tag == BASE:
            built.append(tag)
            base_standin(tag)
        else:
            directory = STANDINS / tag.split(":")[0]
            built.append(tag)
            run(["docker", "build", "-t", tag, str(directory)], log=LOG_DIR / "standins.log")


# --- the stack -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Stack:
    """The compose stack under a project name of its own, on free host ports."""

    def __init__(self) -> None:
        self.compose = [*compose_command(), "-p", COMPOSE_PROJECT, "-f", str(PROJECT / "docker-compose.yml")]
        self.port = free_port()
        self.env = {
            "CCS_IMAGE": IMAGE,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "POSTGRES_PASSWORD": secrets.token_urlsafe(24),
            "CCS_WEB_PORT": str(self.port),
            "CCS_VENTILATOR_PORT": str(free_port()),
            "CCS_SINK_PORT": str(free_port()),
        }
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = ""

    def __call__(self, *args: str, log: str = "compose.log", **kwargs: object) -> subprocess.CompletedProcess:
        return run([*self.compose, *args], env=self.env, log=LOG_DIR / log if log else None, **kwargs)

    def build(self) -> None:
        """docker-compose build, saying each step of the Dockerfile as it starts (the first build takes
        minutes: TeX Live, then the Python packages)."""
        argv = [*self.compose, "build"]
        with (LOG_DIR / "build.log").open("wb") as log:
            process = subprocess.Popen(argv, env={**os.environ, **self.env}, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT)  # fmt: skip
            for line in process.stdout:
                log.write(line)
                text = line.decode(errors="replace").strip()
                if text.startswith("Step "):
                    say(f"  {text[:110]}")
            if process.wait() != 0:
                tail = (LOG_DIR / "build.log").read_bytes()[-3000:].decode(errors="replace")
                raise CheckFailed(f"docker-compose build exited with {process.returncode}:\n{tail}")

    def up(self) -> None:
        self("up", "-d", "--no-build")
        self.wait_healthy()

    def wait_healthy(self, timeout: float = 600) -> None:
        """Until /healthz answers 200 and every long-running container is running and, where it has a check,
        healthy."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            states = self.states()
            waiting = {name: state for name, state in states.items() if state not in ("running/healthy", "running/-")}
            waiting.pop("migrate", None)
            if not waiting and self.get("/healthz", token=False)[0] == 200:
                return
            now = ", ".join(f"{name} {state}" for name, state in sorted(waiting.items())) or "/healthz"
            if now != last:
                say(f"waiting for {now}")
                last = now
            time.sleep(2)
        self("logs", "--no-color", "--tail", "40", log="stack.log", check=False)
        raise CheckFailed(f"the stack was not healthy within {timeout:.0f} s: {last} (var/deploy-check/stack.log)")

    def states(self) -> dict[str, str]:
        """Each service's container state, with its health: 'running/healthy', 'exited/-'..."""
        ids = self("ps", "-q", log="", check=False).stdout.decode().split()
        if not ids:
            return {}
        fields = "{{index .Config.Labels \"com.docker.compose.service\"}} {{.State.Status}}/" \
                 "{{if .State.Health}}{{.State.Health.Status}}{{else}}-{{end}}"  # fmt: skip
        lines = run(["docker", "inspect", "-f", fields, *ids], check=False).stdout.decode().splitlines()
        return dict(line.split(" ", 1) for line in lines if " " in line)

    def get(self, path: str, *, token: bool = True) -> tuple[int, bytes]:
        request = urllib.request.Request(self.url + path)  # noqa: S310 - http://127.0.0.1, built here
        if token:
            request.add_header("X-Service-Token", self.token)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError):
            return 0, b""

    def ccs(self, *args: str) -> str:
        env = {"CCS_URL": self.url, "CCS_TOKEN": self.token, "XDG_CONFIG_HOME": str(LOG_DIR / "ccs-config")}
        ccs = PROJECT / ".venv" / "bin" / "ccs"
        return run([str(ccs) if ccs.exists() else "ccs", *args], env=env, log=LOG_DIR / "ccs.log").returncode

    def documents(self) -> dict[str, tuple[str, str | None]]:
        """Each document's status and the API's link to its HTML (None without), as the API lists them."""
        status, body = self.get(f"/api/corpora/{CORPUS}/services/{SERVICE}/documents?page_size=100")
        if status != 200:
            raise CheckFailed(f"GET the documents answered {status}: {body[:300]!r}")
        return {row["document"]: (row["status"], row.get("html")) for row in json.loads(body)["documents"]}

    def down(self, *, volumes: bool) -> None:
        self("down", "--remove-orphans", *(["-v"] if volumes else []), check=False)


# --- outside Docker --------------------------------------------------------------------------------


def convert_outside(paths: list[Path]) -> dict[str, str]:
    """Each paper's status converted here as a worker converts it: the sandbox, the service's profile, the
    compose workers' limits."""
    how = profiles.invocation(
        profiles.PRESETS[PROFILE].profile, roots=[], timeout=WORKER_TIMEOUT, memory_mb=WORKER_MEMORY_MB,
        latexmlc="latexmlc",
    )  # fmt: skip

    def one(path: Path) -> tuple[str, str]:
        entry = inspect_entry(path, path.name)
        if entry.problem:
            return path.name, "invalid"
        converted = convert_task(
            pack_entry(path, entry.kind, path.name), timeout=how.timeout, memory_mb=how.memory_mb,
            latexmlc=how.executable, extra_args=how.options, read_only=how.read_only, watch=engine.Watch(),
        )  # fmt: skip
        with zipfile.ZipFile(BytesIO(converted.result)) as archive:
            status = parse_log(archive.read("cortex.log")).status
        return path.name, COMPLETED_NAMES.get(status, "fatal")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, paths))


# --- the check -------------------------------------------------------------------------------------


def document_name(paper: str) -> str:
    return paper.removesuffix(".tar.gz").removesuffix(".zip")


def check(args: argparse.Namespace) -> None:
    started = time.monotonic()
    timings: list[str] = []

    def took(what: str, since: float) -> None:
        timings.append(f"{what} {time.monotonic() - since:.0f} s")
        say(f"{what}: {time.monotonic() - since:.0f} s")

    papers = [args.corpus / name for name in args.paper]
    for path in papers:
        if not path.exists():
            raise CheckFailed(f"{path} does not exist")
    outside: dict[str, str] = {}
    outside_error: list[BaseException] = []

    def outside_thread() -> None:
        try:
            outside.update(convert_outside(papers))
        except BaseException as exc:
            outside_error.append(exc)

    say(f"converting {len(papers)} papers outside Docker meanwhile (the same path, profile and limits)")
    converter = threading.Thread(target=outside_thread, daemon=True)
    converter.start()

    step = time.monotonic()
    dockerd = engine_start()
    built: list[str] = []
    stack: Stack | None = None
    try:
        upstream_images(built)
        took("engine and upstream images", step)
        stack = Stack()
        say(f"building {IMAGE} (docker-compose build; log: var/deploy-check/build.log)")
        step = time.monotonic()
        stack.build()
        took("image built", step)
        say(f"bringing the stack up on port {stack.port}")
        step = time.monotonic()
        stack.up()
        took("stack healthy", step)
        token = stack("exec", "-T", "web", "python", "manage.py", "create_token", "deploy-check", log="")
        stack.token = token.stdout.decode().strip().splitlines()[-1]

        archive = run(["tar", "-c", "-C", str(args.corpus), *args.paper]).stdout
        unpack = f"mkdir -p /app/var/corpora/{CORPUS} && tar -x -C /app/var/corpora/{CORPUS}"
        stack("exec", "-T", "web", "sh", "-c", unpack, input=archive, log="")
        say("importing, registering and activating through the API (ccs; log: var/deploy-check/ccs.log)")
        step = time.monotonic()
        stack.ccs("import", CORPUS, f"/app/var/corpora/{CORPUS}", "--yes", "--wait")
        stack.ccs("register", SERVICE, "--profile", PROFILE, "--yes")
        stack.ccs("activate", CORPUS, SERVICE, "--yes", "--wait")
        inside = stack.documents()
        took(f"{len(papers)} papers imported and converted in the stack", step)

        converter.join()
        if outside_error:
            raise CheckFailed(f"the conversions outside Docker failed: {outside_error[0]!r}")
        mismatches = []
        print(f"{'paper':50s} {'in Docker':12s} outside", flush=True)
        for paper in args.paper:
            status = inside.get(document_name(paper), (None, False))[0]
            mark = "" if status == outside[paper] else "   <- differs"
            print(f"{paper:50s} {status!s:12s} {outside[paper]}{mark}", flush=True)
            if mark:
                mismatches.append(paper)
        if mismatches:
            raise CheckFailed(f"statuses differ in Docker and outside: {', '.join(mismatches)}")

        probes(stack)

        say("docker-compose down, then up: the reports, results and token must survive")
        step = time.monotonic()
        stack.down(volumes=False)
        stack.up()
        after = stack.documents()
        if after != inside:
            raise CheckFailed(f"after down and up the documents are {after}, not {inside}")
        for name, (_, html) in after.items():
            if html:
                status, _ = stack.get(html)
                if status != 200:
                    raise CheckFailed(f"after down and up the HTML of {name} answers {status}")
        took("down and up, reports and HTML read again", step)
        say(f"deploy-check passed in {time.monotonic() - started:.0f} s ({'; '.join(timings)})")
    finally:
        if stack is not None and args.keep:
            say(f"kept: the stack answers at {stack.url} (CCS_TOKEN={stack.token}); remove it with"
                f" `SECRET_KEY=unused {' '.join(stack.compose)} down -v` and"
                f" `docker image rm {' '.join([IMAGE, *built])}`"
                + (f", then stop dockerd (pid {dockerd.pid})" if dockerd else ""))  # fmt: skip
        else:
            say("removing what it made")
            if stack is not None:
                stack.down(volumes=True)
            run(["docker", "image", "rm", "-f", IMAGE, *built], check=False)
            engine_stop(dockerd)
            removed = (["the stack's containers, network and volumes"] if stack else []) + [IMAGE, *built]
            say(f"removed: {', '.join(removed)}" + (", the dockerd started here" if dockerd else ""))


def probes(stack: Stack) -> None:
    """/healthz, GET /api/health and /metrics, as a load balancer, an operator and Prometheus read them."""
    status, _ = stack.get("/healthz", token=False)
    if status != 200:
        raise CheckFailed(f"/healthz answered {status}")
    status, body = stack.get("/api/health")
    if status != 200:
        raise CheckFailed(f"GET /api/health answered {status}: {body[:300]!r}")
    checks = {item["name"]: item for item in json.loads(body)["checks"]}
    sandbox = checks.get("conversion_sandbox", {})
    if sandbox.get("status") != "ok":
        raise CheckFailed(f"the sandbox check is not ok: {sandbox}")
    problems = {name: item.get("summary") for name, item in checks.items() if item.get("status") == "problem"}
    if problems:
        raise CheckFailed(f"GET /api/health reports problems: {problems}")
    status, body = stack.get("/metrics")
    if status != 200 or b"ccs_backlog_tasks" not in body:
        raise CheckFailed(f"/metrics answered {status} without ccs_backlog_tasks")
    say(f"/healthz 200; /api/health: {len(checks)} checks, none a problem; /metrics has ccs_backlog_tasks")
    found = stack("exec", "-T", "latexml-worker", "kpsewhich", *CLASSES, log="", check=False).stdout.decode().split()
    if len(found) != len(CLASSES):
        raise CheckFailed(f"kpsewhich in a worker container finds {found} of {', '.join(CLASSES)}")
    say(f"the worker containers find {', '.join(CLASSES)} (kpsewhich)")


def stop_on_sigterm() -> None:
    """SIGTERM ends the check as Ctrl-C does: through its clean-up."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REAL_CORPUS, help="where the papers are")
    parser.add_argument(
        "--paper", action="append", default=[], help=f"a paper to convert (default {', '.join(PAPERS)})"
    )
    parser.add_argument("--keep", action="store_true", help="leave the stack and its images for a look afterwards")
    args = parser.parse_args()
    args.paper = args.paper or list(PAPERS)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    for log in LOG_DIR.glob("*.log"):
        log.unlink()
    stop_on_sigterm()
    try:
        check(args)
    except KeyboardInterrupt:
        say("deploy-check stopped")
        return 130
    except CheckFailed as exc:
        say(f"deploy-check FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
