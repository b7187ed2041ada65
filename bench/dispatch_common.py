"""Set-up shared by the dispatcher benchmarks (bench_dispatcher.py, bench_throughput.py): a database of
their own (`ccs_dispatch_bench`), Redis database 14, corpus roots and result directory under
/tmp/ccs-dispatch-bench, and the child processes they start (dispatcher, workers, Celery), which are
always stopped when the script ends, however it ends.

Import this module before anything from Django or the project: it sets the environment at import.
Only `setup()` (or `django_ready()` in a child) sets Django up.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
BENCH_DB = "ccs_dispatch_bench"
PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
REDIS_URL = "redis://127.0.0.1:6379/14"
BENCH_ROOT = Path("/tmp/ccs-dispatch-bench")
CORPUS_ROOT = BENCH_ROOT / "corpora"
RESULTS_DIR = BENCH_ROOT / "results"
VAR_DIR = BENCH_ROOT / "var"
LOG_DIR = BENCH_ROOT / "logs"
ACTOR = "bench"

# Before django.setup(): settings read these once, at import. Children inherit them (child_env).
os.environ["DATABASE_URL"] = f"{PG_SERVER}/{BENCH_DB}"
os.environ["REDIS_URL"] = REDIS_URL
os.environ["CORPUS_ROOTS"] = str(CORPUS_ROOT)
os.environ["RESULTS_DIR"] = str(RESULTS_DIR)
os.environ["VAR_DIR"] = str(VAR_DIR)
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
os.environ.setdefault("LOG_LEVEL", "WARNING")
for _path in (str(PROJECT_ROOT), str(BENCH_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from steal import StealWatch, cpu_ticks  # noqa: E402  (bench/ is on the path from here on)

# --- database and Django ---------------------------------------------------------------------------


def results_dir_set(path: Path) -> None:
    """Put result archives under `path` instead of RESULTS_DIR (before setup(): settings read it once)."""
    global RESULTS_DIR
    RESULTS_DIR = path
    os.environ["RESULTS_DIR"] = str(path)


def database_ensure() -> None:
    """Create the benchmark database on the server if it is not there yet."""
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def django_ready() -> None:
    """django.setup() once, without migrating (for child processes such as Celery workers)."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()


def setup() -> None:
    """Directories, database, Django and migrations; call once at the top of each script."""
    for directory in (CORPUS_ROOT, RESULTS_DIR, VAR_DIR, LOG_DIR):
        directory.mkdir(parents=True, exist_ok=True)
    database_ensure()
    django_ready()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


# --- timing ----------------------------------------------------------------------------------------


@dataclass
class Timer:
    """Wall-clock seconds of a `with timed() as t:` block, in `t.seconds` once the block ends."""

    started: float = 0.0
    seconds: float = 0.0


@contextmanager
def timed() -> Iterator[Timer]:
    """Time a block with perf_counter."""
    timer = Timer(started=time.perf_counter())
    try:
        yield timer
    finally:
        timer.seconds = time.perf_counter() - timer.started


def fail(message: str) -> None:
    """Stop the benchmark loudly: a wrong result makes its timing meaningless."""
    print(f"FAILED: {message}", file=sys.stderr)
    raise SystemExit(1)


def _process_times() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, CPU ticks used so far, command line) of every user process."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if command:  # kernel threads have none
            fields = stat[stat.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), command[:100])
    return found


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat. Time the hypervisor took
    (steal) is not this machine's work and is not counted as busy; StealWatch reports it."""
    values, steal = cpu_ticks()
    idle = values[3] + values[4]  # idle and iowait
    return sum(values) - idle - steal, sum(values)


def _foreign(processes: dict[int, tuple[int, int, str]]) -> dict[int, str]:
    """The processes that are not this benchmark's: neither descendants of this process nor backends
    of its database, nor shared servers (PostgreSQL's own processes, Redis)."""
    mine = {os.getpid()}
    changed = True
    while changed:
        before = len(mine)
        mine |= {pid for pid, (parent, _, _) in processes.items() if parent in mine}
        changed = len(mine) != before
    foreign = {}
    for pid, (_, _, command) in processes.items():
        if pid in mine or BENCH_DB in command or command.startswith("redis-server"):
            continue
        parts = command.split()
        if command.startswith("postgres:") and len(parts) < 5:  # checkpointer, WAL writer: shared
            continue
        foreign[pid] = command
    return foreign


def children_of(pid: int) -> set[int]:
    """The pids of the processes whose parent is `pid` (the dispatcher's forked sink)."""
    return {child for child, (parent, _, _) in _process_times().items() if parent == pid}


@dataclass
class CpuWatch:
    """CPU that other processes (another benchmark, a test run) used during a measured window: on 2
    CPUs that skews a result, so each result says how much there was."""

    started: float = 0.0
    before: dict[int, tuple[int, int, str]] = field(default_factory=dict)
    machine_before: tuple[int, int] = (0, 0)
    steal: StealWatch = field(default_factory=StealWatch)

    def start(self) -> CpuWatch:
        self.started, self.before, self.machine_before = time.monotonic(), _process_times(), _machine_ticks()
        self.steal.start()
        return self

    def machine_busy(self) -> float:
        """CPU the whole machine used since start(), in CPUs (2.0 = both CPUs busy all the time)."""
        busy, total = _machine_ticks()
        elapsed = total - self.machine_before[1]
        return (busy - self.machine_before[0]) / elapsed * (os.cpu_count() or 1) if elapsed else 0.0

    def share(self, wanted: Callable[[int, str], bool]) -> float:
        """Share of one CPU used since start() by the processes (pid, command) that `wanted` picks and
        that are alive now (a database connection closed meanwhile is not counted)."""
        seconds = time.monotonic() - self.started
        ticks = os.sysconf("SC_CLK_TCK")
        used = 0
        for pid, (_, total, command) in _process_times().items():
            if wanted(pid, command):  # a process started meanwhile counts from zero
                used += total - self.before.get(pid, (0, 0, ""))[1]
        return used / ticks / seconds

    def report(self) -> str:
        """Share of one CPU used by foreign processes alive at both ends of the window."""
        seconds = time.monotonic() - self.started
        ticks = os.sysconf("SC_CLK_TCK")
        now = _process_times()
        used = []
        for pid, command in _foreign(now).items():
            if pid in self.before:
                share = (now[pid][1] - self.before[pid][1]) / ticks / seconds
                if share >= 0.02:
                    used.append((share, command))
        used.sort(reverse=True)
        top = "; ".join(f"{100 * share:.0f}% {command[:70]}" for share, command in used[:3])
        return (
            f"other processes used {100 * sum(share for share, _ in used):.0f}% of a CPU"
            + (f": {top}" if top else "")
            + f"; {self.steal.line()}"
        )


# --- child processes -------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child: the bench database, Redis, roots and directories, plus `extra`."""
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", LOG_LEVEL=os.environ.get("LOG_LEVEL", "WARNING"))
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), str(BENCH_DIR)])
    env.update(extra)
    return env


@dataclass
class Child:
    """A process this script started, in a session of its own (so its whole group can be signalled)."""

    name: str
    process: subprocess.Popen
    log_path: Path | None = None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def signal_group(self, signum: int) -> None:
        """Send `signum` to the child's process group (it leads it: start_new_session)."""
        if self.alive:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)

    def stop(self, grace: float = 20.0) -> int:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL the group; returns the exit code."""
        self.signal_group(signal.SIGTERM)
        try:
            return self.process.wait(grace)
        except subprocess.TimeoutExpired:
            print(f"{self.name} did not stop within {grace:.0f} s; killing it", file=sys.stderr)
        self.signal_group(signal.SIGKILL)
        return self.process.wait(10)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the child's log file, for a failure message."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Children:
    """Every process the script started; `stop_all` stops them in reverse order of starting."""

    started: list[Child] = field(default_factory=list)

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path = PROJECT_ROOT,
        stdin: int | None = None,
        stdout: int | IO[bytes] | None = None,
    ) -> Child:
        """Start `argv` in a new session; its output goes to LOG_DIR/<name>.log unless `stdout` is given."""
        log_path = None
        log_handle = None
        if stdout is None:
            log_path = LOG_DIR / f"{name}.log"
            log_handle = open(log_path, "wb")  # noqa: SIM115 - the child owns it until it exits
            stdout = log_handle
        try:
            process = subprocess.Popen(
                argv, cwd=cwd, env=env or child_env(), stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        finally:
            if log_handle is not None:
                log_handle.close()
        child = Child(name=name, process=process, log_path=log_path)
        self.started.append(child)
        return child

    def stop_all(self) -> None:
        """Stop every child still running, last started first."""
        while self.started:
            child = self.started.pop()
            if child.alive:
                child.stop()


@contextmanager
def children_owned() -> Iterator[Children]:
    """The processes started inside the block are stopped when it ends, also on SIGTERM, SIGINT or an
    error; an atexit hook covers an exit that skips the block's end."""
    children = Children()

    def on_signal(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)}
    atexit.register(children.stop_all)
    try:
        yield children
    finally:
        children.stop_all()
        atexit.unregister(children.stop_all)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def wait_for(predicate: Callable[[], object], *, timeout: float, interval: float = 0.05, what: str) -> object:
    """Poll `predicate` until it is truthy; fail the benchmark after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    fail(f"timed out after {timeout:.0f} s waiting for {what}")
    return None


# --- the dispatcher as a child ---------------------------------------------------------------------


@dataclass
class DispatcherChild:
    """A `manage.py dispatcher` child on free ports."""

    child: Child
    ventilator_port: int
    sink_port: int

    @property
    def ventilator(self) -> str:
        return f"tcp://127.0.0.1:{self.ventilator_port}"

    @property
    def sink(self) -> str:
        return f"tcp://127.0.0.1:{self.sink_port}"


def dispatcher_start(children: Children, **settings: str) -> DispatcherChild:
    """Start `manage.py dispatcher` with `settings` as environment (DISPATCHER_*) and wait until it has
    bound its ports and written its state row."""
    from services.models import DispatcherState

    ventilator_port, sink_port = free_port(), free_port()
    env = child_env(DISPATCHER_VENTILATOR_PORT=str(ventilator_port), DISPATCHER_SINK_PORT=str(sink_port), **settings)
    child = children.start("dispatcher", [sys.executable, "manage.py", "dispatcher"], env=env)

    def ready() -> bool:
        if not child.alive:
            fail(f"the dispatcher exited with {child.process.returncode}:\n{child.log_tail()}")
        return DispatcherState.objects.filter(pid=child.process.pid).exists()

    wait_for(ready, timeout=60, what="the dispatcher to start")
    return DispatcherChild(child=child, ventilator_port=ventilator_port, sink_port=sink_port)


def spy_start(children: Children, pid: int, output: Path, rate: int) -> Child:
    """Attach py-spy to process `pid` (sampling `rate` times a second, idle time included, collapsed
    stacks with line numbers to `output`); returns once it samples. Stop it with spy_stop."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        fail("--profile needs py-spy: .venv/bin/pip install py-spy")
    output.unlink(missing_ok=True)
    argv = [spy, "record", "--pid", str(pid), "--subprocesses", "--idle", "--rate", str(rate), "--format", "raw",
            "--output", str(output)]  # fmt: skip
    child = children.start("py-spy", argv)

    def sampling() -> bool:
        if not child.alive:
            fail(f"py-spy exited with {child.process.returncode}:\n{child.log_tail()}")
        return "Sampling process" in (child.log_tail() or "")

    wait_for(sampling, timeout=30, what="py-spy to attach")
    return child


def spy_stop(child: Child) -> None:
    """Stop py-spy as Ctrl-C does, so it writes its samples."""
    with suppress(ProcessLookupError):
        os.kill(child.process.pid, signal.SIGINT)
    try:
        child.process.wait(30)
    except subprocess.TimeoutExpired:
        child.stop()


def dispatcher_counters() -> dict[str, int]:
    """The counters the dispatcher flushed last (it flushes once a second and when it stops)."""
    from services.models import DispatcherState

    fields = ["leased", "dispatched", "ingested", "discarded", "garbage", "reaped", "failed_for_retries"]
    row = DispatcherState.objects.values(*fields).order_by("-pk").first()
    return dict(row or {})


# --- corpora, services and task counts -------------------------------------------------------------


def service_ensure(name: str) -> int:
    """The id of service `name`, registered now if it is not yet."""
    from services.actions import service_register
    from services.models import Service

    service = Service.objects.filter(name=name).first()
    if service is None:
        service = service_register(name=name, actor=ACTOR, description="dispatcher benchmark service")
    return service.pk


def corpus_remove(name: str) -> float | None:
    """Delete a corpus left by an earlier run with corpus_delete, and its result archives; seconds or None."""
    from corpora.actions import corpus_delete
    from corpora.models import Corpus

    corpus_id = Corpus.objects.filter(name=name).values_list("pk", flat=True).first()
    if corpus_id is None:
        return None
    with timed() as timer:
        corpus_delete(name=name, confirm=name, actor=ACTOR)
        shutil.rmtree(RESULTS_DIR / str(corpus_id), ignore_errors=True)
    return timer.seconds


def fresh_ext4(mount_point: Path, *, gigabytes: int = 2) -> str | None:
    """Mount a newly made ext4 file system (a sparse image file under BENCH_ROOT, on a loop device) at
    `mount_point`, unmounted and deleted when the script ends; None on success, else why not (not root,
    no loop devices). Result archives go there so that a run does not pay for the last run's deleted
    ones (see files_settle): on the shared root file system that costs a run up to half its speed."""
    image = BENCH_ROOT / "results-fs.img"
    subprocess.run(["umount", str(mount_point)], capture_output=True, check=False)  # left by a killed run
    try:
        BENCH_ROOT.mkdir(parents=True, exist_ok=True)
        image.unlink(missing_ok=True)
        with open(image, "wb") as handle:
            handle.truncate(gigabytes << 30)
        mount_point.mkdir(parents=True, exist_ok=True)
        # Inode tables and journal written now: left lazy, a kernel thread would write them during the run.
        make = ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(image)]
        for command in (make, ["mount", "-o", "loop", str(image), str(mount_point)]):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                image.unlink(missing_ok=True)
                return f"{' '.join(command[:2])}: {(done.stderr or done.stdout).strip()}"
    except OSError as exc:
        return str(exc)

    def remove() -> None:
        subprocess.run(["umount", str(mount_point)], capture_output=True, check=False)
        image.unlink(missing_ok=True)

    atexit.register(remove)
    return None


FILES_SETTLED_MICROSECONDS = 100


def files_settle(directory: Path, *, probe: int = 200, timeout: float = 420.0) -> float:
    """Wait until creating a small file in `directory` is cheap again; the last probe's µs per file.

    ext4 does not reuse an inode freed in the last 60 s (360 s while its inode table block is not yet
    written back): to find a free inode for a new file it walks past every recently freed one of the
    directory's block group, in the kernel, on the CPU (`recently_deleted` in perf). After an earlier
    run's 20,000 result archives are deleted, creating a file in the directory the dispatcher writes
    result files in costs 250-1,100 µs instead of ~30 µs (measured) until those inodes age, and the sink
    spends most of its time there. The benchmark measures the dispatcher, not that clean-up, so it waits
    for it; the probe runs in the directory the dispatcher creates its files in, because the walk is per
    block group. Probe files are kept until the script ends (deleting them would prolong the wait)."""
    directory.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []

    def remove() -> None:
        for path in made:
            with suppress(OSError):
                path.unlink()

    atexit.register(remove)
    deadline = time.monotonic() + timeout
    data = b"x" * 1000
    while True:
        started = time.perf_counter()
        for _ in range(probe):
            path = directory / f"settle-probe.{os.getpid()}.{len(made)}"
            path.write_bytes(data)
            made.append(path)
        each = (time.perf_counter() - started) / probe * 1e6
        if each < FILES_SETTLED_MICROSECONDS or time.monotonic() > deadline:
            return each
        time.sleep(5.0)


def corpus_import_now(name: str, directory: Path) -> tuple[int, float]:
    """Import `directory` as corpus `name` through corpus_import and its job, run here; (id, seconds)."""
    from corpora.actions import corpus_import
    from corpora.models import Corpus
    from jobs.runner import job_run

    with timed() as timer:
        job = corpus_import(name=name, path=str(directory), actor=ACTOR, send=False)
        state = job_run(job.pk)
    job.refresh_from_db()
    if state != "succeeded":
        fail(f"the import of {directory} ended {state}: {job.message}")
    return Corpus.objects.get(name=name).pk, timer.seconds


def service_activate_now(corpus_name: str, service_name: str) -> tuple[int, float]:
    """Activate a service on a corpus through service_activate and its job, run here; (tasks, seconds)."""
    from corpora.actions import service_activate
    from jobs.runner import job_run

    with timed() as timer:
        job = service_activate(corpus_name=corpus_name, service_name=service_name, actor=ACTOR, send=False)
        state = job_run(job.pk)
    job.refresh_from_db()
    if state != "succeeded":
        fail(f"activating {service_name} on {corpus_name} ended {state}: {job.message}")
    return (job.result or {}).get("tasks", 0), timer.seconds


def pair_buckets(corpus_id: int, service_id: int) -> dict[int, int]:
    """Tasks of a (corpus, service) pair per status bucket (0 TODO, 1 leased, negative final), from
    the trigger-kept count table: a lookup, cheap enough to poll."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT bucket, count FROM corpora_taskcount WHERE corpus_id = %s AND service_id = %s AND count <> 0",
            [corpus_id, service_id],
        )
        return dict(cursor.fetchall())


def pair_drained_wait(
    corpus_id: int, service_id: int, *, expected: int, started: float, timeout: float, interval: float = 0.02
) -> tuple[float, float | None]:
    """Poll until `expected` tasks of the pair are final (none TODO or leased). Returns (seconds from
    `started`, a perf_counter value, until then; seconds until the first task was seen leased or final,
    or None if the poll never caught that moment)."""
    first_lease = None
    deadline = started + timeout
    while True:
        buckets = pair_buckets(corpus_id, service_id)
        now = time.perf_counter()
        todo, leased = buckets.get(0, 0), buckets.get(1, 0)
        final = sum(count for bucket, count in buckets.items() if bucket < 0)
        if first_lease is None and (leased or final):
            first_lease = now - started
        if final >= expected and todo + leased == 0:
            return now - started, first_lease
        if now > deadline:
            fail(f"{todo} TODO, {leased} leased and {final} final tasks (of {expected}) after {timeout:.0f} s")
        time.sleep(interval)
