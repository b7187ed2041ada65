"""The benchmark harness every script in bench/ uses: its own database on the real PostgreSQL, a Redis
database and directories of its own (`configure`), Django and migrations (`setup`), timers and
percentiles, the quiet-machine checks (load average, other benchmarks, the hypervisor's steal), phase
and SQL statement timing, and the child processes a script starts (dispatcher, workers, Celery), which
are always stopped when the script ends, however it ends.

A script calls `configure()` right after importing this module, before anything imports Django's
settings: settings read the environment once, at import. Only `setup()` (or `django_ready()` in a
child) sets Django up.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
# The sample corpus of real arXiv documents lives next to the checkout, not in it.
SAMPLE_CORPUS = PROJECT_ROOT.parent / "shared" / "corpora" / "sample"
PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
ACTOR = "bench"

# Set by configure(): the script's database, Redis URL and directories.
BENCH_DB = ""
REDIS_URL = ""
BENCH_ROOT = Path("/tmp/ccs-bench")
CORPUS_ROOT = BENCH_ROOT / "corpora"
RESULTS_DIR = BENCH_ROOT / "results"
VAR_DIR = BENCH_ROOT / "var"
LOG_DIR = BENCH_ROOT / "logs"

for _path in (str(PROJECT_ROOT), str(BENCH_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def configure(database: str, redis_db: int, root: Path) -> None:
    """Point this process (and the children it starts: child_env) at database `database`, Redis database
    `redis_db` and directories under `root` (corpus root, results, VAR_DIR, logs). Before setup().
    The environment variables BENCH_DATABASE, BENCH_REDIS_DB and BENCH_ROOT override the three, so two
    checkouts (or a benchmark and a test run) on one machine keep apart."""
    global BENCH_DB, REDIS_URL, BENCH_ROOT, CORPUS_ROOT, RESULTS_DIR, VAR_DIR, LOG_DIR
    database = os.environ.get("BENCH_DATABASE", database)
    redis_db = int(os.environ.get("BENCH_REDIS_DB", redis_db))
    root = Path(os.environ.get("BENCH_ROOT", root))
    BENCH_DB, REDIS_URL, BENCH_ROOT = database, f"redis://127.0.0.1:6379/{redis_db}", root
    CORPUS_ROOT, RESULTS_DIR, VAR_DIR, LOG_DIR = root / "corpora", root / "results", root / "var", root / "logs"
    os.environ["DATABASE_URL"] = f"{PG_SERVER}/{BENCH_DB}"
    os.environ["REDIS_URL"] = REDIS_URL
    os.environ["CORPUS_ROOTS"] = str(CORPUS_ROOT)
    os.environ["RESULTS_DIR"] = str(RESULTS_DIR)
    os.environ["VAR_DIR"] = str(VAR_DIR)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")


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


# --- timing and percentiles ----------------------------------------------------------------------


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


def retired_purge() -> tuple[float, int]:
    """Start the purge of retired messages as beat would, and run it here as a worker would (none runs
    here): the seconds it took and how many tasks' retired messages it deleted."""
    from corpora.tasks.reports import messages_purge_scheduled
    from jobs.models import Job
    from jobs.runner import job_run

    began = time.perf_counter()
    job_id = messages_purge_scheduled()
    if job_id is None:
        return time.perf_counter() - began, 0
    job_run(job_id)
    purged = (Job.objects.get(pk=job_id).result or {}).get("tasks", 0)
    return time.perf_counter() - began, purged


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile (0..1) by linear interpolation between the closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# --- a quiet machine: load average, other benchmarks, the hypervisor's steal ---------------------


def load_line() -> str:
    """The machine's load averages, printed with each result: the machine is shared, and a busy one
    makes every number here slower."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


def quiet_arguments(parser: argparse.ArgumentParser, *, wait: float) -> None:
    """The options of quiet_wait: --max-load (default 0.6) and --wait (at most `wait` seconds)."""
    parser.add_argument("--max-load", type=float, default=0.6, help="wait for this 1-min load average first")
    parser.add_argument("--wait", type=float, default=wait, help=f"seconds to wait for it at most (default {wait:.0f})")


def quiet_wait(max_load: float, limit_seconds: float) -> None:
    """Wait until the 1-minute load average is at most `max_load`, for at most `limit_seconds`."""
    deadline = time.monotonic() + limit_seconds
    if os.getloadavg()[0] > max_load:
        print(f"waiting for the machine to quiet down (1-min load <= {max_load}): {load_line()}", flush=True)
    while os.getloadavg()[0] > max_load:
        if time.monotonic() > deadline:
            print(f"still busy after {limit_seconds:.0f} s; measuring anyway: {load_line()}", flush=True)
            return
        time.sleep(5)
    print(f"start: {load_line()}", flush=True)


# Steal is CPU time the hypervisor gave to other guests while this VM wanted it. On this shared VM the
# same code measured up to twice as slow at times with no other process using the CPU, and steal
# explained it (21-26% of all CPU time during such a phase), so every result is printed with it, and a
# step waits for a quiet hypervisor first (steal_settle) and is measured again when it was disturbed.


def cpu_ticks() -> tuple[list[int], int]:
    """The machine's CPU ticks so far, from the first line of /proc/stat (user, nice, system, idle,
    iowait, irq, softirq, steal, ...), and of them the steal (0 where the kernel does not count it)."""
    with open("/proc/stat") as handle:
        values = [int(value) for value in handle.readline().split()[1:]]
    return values, values[7] if len(values) > 7 else 0


def _ticks() -> tuple[int, int]:
    """(steal, total) CPU ticks of the machine so far."""
    values, steal = cpu_ticks()
    return steal, sum(values)


@dataclass
class StealWatch:
    before: tuple[int, int] = (0, 0)

    def start(self) -> StealWatch:
        self.before = _ticks()
        return self

    def share(self) -> float:
        """The fraction of all CPU time since start() that the hypervisor took."""
        steal, total = _ticks()
        elapsed = total - self.before[1]
        return (steal - self.before[0]) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        return f"the hypervisor took {100 * self.share():.0f}% of the CPU time meanwhile (steal)"


# A measured step waits until the hypervisor takes at most STEAL_QUIET of the CPU time (over a probe of a
# few seconds), and one during which it took more than STEAL_DISTURBED is measured again, as a step
# disturbed by another benchmark is.
STEAL_QUIET = 0.10
STEAL_DISTURBED = 0.15


def steal_settle(max_share: float = STEAL_QUIET, *, probe: float = 3.0, timeout: float = 900.0) -> tuple[float, float]:
    """Wait until the steal over one `probe` window is at most `max_share` (or `timeout` passed);
    returns (seconds waited, the last window's share)."""
    began = time.monotonic()
    while True:
        watch = StealWatch().start()
        time.sleep(probe)
        share = watch.share()
        if share <= max_share or time.monotonic() - began > timeout:
            return time.monotonic() - began - probe, share


def others_running() -> dict[int, str]:
    """Other `bench_` processes on this machine (not this one, its parents or its children): pid -> command."""
    import psutil

    me = psutil.Process()
    mine = {me.pid, *(parent.pid for parent in me.parents())}
    others = {}
    for candidate in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(candidate.info["cmdline"] or [])
        if "bench_" not in command or candidate.info["pid"] in mine:
            continue
        try:
            if me.pid in {parent.pid for parent in candidate.parents()}:
                continue
        except psutil.Error:
            continue
        others[candidate.info["pid"]] = command[:70]
    return others


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far, or None once it is gone."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system + times.children_user + times.children_system


def others_wait(limit_seconds: float) -> bool:
    """Wait until no other `bench_` process runs (they share the two cores), for at most the limit;
    False when the limit ran out."""
    deadline = time.monotonic() + limit_seconds
    shown = False
    while others := others_running():
        shown_others = [f"{pid} {command}" for pid, command in others.items()]
        if time.monotonic() > deadline:
            print(f"  other benchmarks still run after {limit_seconds:.0f} s; measuring anyway: {shown_others}")
            return False
        if not shown:
            print(f"  waiting for other benchmarks to finish: {shown_others}", flush=True)
            shown = True
        time.sleep(5)
    one, five, _ = os.getloadavg()
    print(f"  [quiet: no other bench_ process; load {one:.2f} / {five:.2f} (1/5 min) on {os.cpu_count()} cores]")
    return True


@dataclass
class OthersSeen:
    """Other `bench_` processes seen during a measurement and the CPU seconds they used meanwhile."""

    commands: dict[int, str] = field(default_factory=dict)
    cpu: float = 0.0


@contextmanager
def others_watched() -> Iterator[OthersSeen]:
    """Sample the other `bench_` processes once a second during the block. A benchmark that only
    sleeps while it waits for a quiet machine does not disturb ours, so what counts is their CPU."""
    import psutil

    seen = OthersSeen()
    started = time.time()
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        for pid, command in others_running().items():
            used = cpu_seconds(pid)
            if used is None:
                continue
            if pid not in first:
                seen.commands[pid] = command
                try:
                    born_inside = psutil.Process(pid).create_time() >= started
                except psutil.Error:
                    continue
                first[pid] = 0.0 if born_inside else used
            last[pid] = used

    def loop() -> None:
        while not done.wait(1.0):
            sample()

    sample()
    watcher = threading.Thread(target=loop, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()
        sample()
        seen.cpu = sum(last[pid] - first[pid] for pid in first)


OTHERS_CPU_ALLOWED_S = 1.0  # CPU seconds other benchmarks may use during a measurement
DISTURBED: list[str] = []  # sections measured while another benchmark ran (after every retry)


def quietly(label: str, measure: Callable[[], Any], *, wait: float, attempts: int = 3,
            between: Callable[[], Any] | None = None) -> Any:  # fmt: skip
    """Run `measure` once no other benchmark runs and the hypervisor leaves the VM its CPUs (steal_settle);
    repeat it (after `between`, which undoes its effect) when another benchmark started meanwhile or the
    hypervisor took more than STEAL_DISTURBED of the CPU time, at most `attempts` times. Returns the last
    result."""
    for attempt in range(1, attempts + 1):
        others_wait(wait)
        waited, _ = steal_settle()
        steal = StealWatch().start()
        with others_watched() as seen:
            result = measure()
        stolen = steal.share()
        print(
            f"  [{label}: {steal.line()}" + (f", after waiting {waited:.0f} s for it to fall]" if waited >= 1 else "]")
        )
        if seen.cpu < OTHERS_CPU_ALLOWED_S and stolen <= STEAL_DISTURBED:
            if seen.commands:
                print(f"  ({label}: other benchmarks present but idle meanwhile, {seen.cpu:.1f} CPU s)")
            return result
        shown = ", ".join(f"{pid} {command}" for pid, command in seen.commands.items())
        if seen.cpu >= OTHERS_CPU_ALLOWED_S:
            why = f"other benchmarks used {seen.cpu:.1f} CPU s meanwhile ({shown})"
        else:
            why = f"the hypervisor took {100 * stolen:.0f}% of the CPU time"
        print(f"  {label}: {why}; attempt {attempt} of {attempts}")
        if attempt < attempts and between is not None:
            between()
    DISTURBED.append(label)
    return result


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


# --- phase and statement timing -------------------------------------------------------------------


@dataclass
class PhaseLog:
    """Start and end times (perf_counter) of named phases, and each SQL statement's duration."""

    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    statements: list[tuple[float, float, str]] = field(default_factory=list)

    def seconds(self, name: str) -> float:
        return self.ends[name] - self.starts[name]

    def statements_between(self, start: float, end: float) -> list[tuple[float, str]]:
        """(seconds, sql) of the statements that began within [start, end]."""
        return [(seconds, sql) for began, seconds, sql in self.statements if start <= began <= end]

    def statements_over(self, threshold: float) -> list[tuple[float, str]]:
        """(seconds, sql) of the statements that took at least `threshold` seconds."""
        return [(seconds, sql) for _, seconds, sql in self.statements if seconds >= threshold]


def _wrap_call(log: PhaseLog, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        log.starts[name] = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            log.ends[name] = time.perf_counter()

    return wrapper


def _wrap_generator(log: PhaseLog, name: str, function: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        log.starts[name] = time.perf_counter()
        try:
            yield from function(*args, **kwargs)
        finally:
            log.ends[name] = time.perf_counter()

    return wrapper


@contextmanager
def phases_recorded(
    calls: list[tuple[object, str]], generators: list[tuple[object, str]] | None = None
) -> Iterator[PhaseLog]:
    """Time `module.function` for each (module, "function") pair, and every SQL statement on the
    default connection, while the block runs; the originals are put back afterwards."""
    from django.db import connection

    log = PhaseLog()

    def statement_timer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            log.statements.append((began, time.perf_counter() - began, " ".join(str(sql).split())))

    originals: list[tuple[object, str, Any]] = []
    try:
        for module, attribute in calls:
            original = getattr(module, attribute)
            originals.append((module, attribute, original))
            setattr(module, attribute, _wrap_call(log, attribute, original))
        for module, attribute in generators or []:
            original = getattr(module, attribute)
            originals.append((module, attribute, original))
            setattr(module, attribute, _wrap_generator(log, attribute, original))
        with connection.execute_wrapper(statement_timer):
            yield log
    finally:
        for module, attribute, original in reversed(originals):
            setattr(module, attribute, original)


def statement_lines(statements: list[tuple[float, str]], *, width: int = 110) -> list[str]:
    """Printable lines, one per statement: seconds and the start of its SQL."""
    return [f"    {seconds:8.3f} s  {sql[:width]}" for seconds, sql in statements]


# --- corpora, services, tokens and task counts ------------------------------------------------------


def bench_token() -> str:
    """A fresh raw API token for the bench actor (tokens are stored hashed, so one per run)."""
    from accounts.actions import token_create

    _, raw = token_create(actor=ACTOR, created_by=ACTOR)
    return raw


def service_ensure(name: str) -> int:
    """The id of service `name`, registered now if it is not yet."""
    from services.actions import service_register
    from services.models import Service

    service = Service.objects.filter(name=name).first()
    if service is None:
        service = service_register(name=name, actor=ACTOR, description="dispatcher benchmark service")
    return service.pk


def corpus_delete_if_exists(name: str) -> float | None:
    """Delete a corpus left by an earlier run, so a rerun starts clean; returns seconds, or None."""
    from corpora.actions.corpora import corpus_delete
    from corpora.models import Corpus

    if not Corpus.objects.filter(name=name).exists():
        return None
    with timed() as timer:
        corpus_delete(name=name, confirm=name, actor=ACTOR)
    return timer.seconds


def corpus_purge_unchecked(name: str) -> float | None:
    """Bench-only clean-up of a corpus too large for corpus_delete (see bench/README.md): the same
    purge, with foreign-key and count triggers off (session_replication_role = replica, superuser
    only). The purge deletes the corpus's count rows itself, so the counts stay exact."""
    from django.db import connection, transaction

    from corpora.actions.corpora import _corpus_purge
    from corpora.models import Corpus

    corpus_id = Corpus.objects.filter(name=name).values_list("pk", flat=True).first()
    if corpus_id is None:
        return None
    with timed() as timer, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
        _corpus_purge(corpus_id)
    return timer.seconds


def corpus_remove(name: str) -> float | None:
    """Delete a corpus left by an earlier run with corpus_delete, and its result archives; seconds or None."""
    from corpora.actions.corpora import corpus_delete
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
    from corpora.actions.corpora import corpus_import
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
    from corpora.actions.corpora import service_activate
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
    corpus_id: int,
    service_id: int,
    *,
    expected: int,
    started: float,
    timeout: float,
    interval: float = 0.02,
    interval_after_first: float | None = None,
) -> tuple[float, float | None]:
    """Poll until `expected` tasks of the pair are final (none TODO or leased), every `interval` seconds,
    and every `interval_after_first` once the first task was seen leased (each poll costs the machine
    under test a little CPU). Returns (seconds from `started`, a perf_counter value, until then; seconds
    until the first task was seen leased or final, or None if the poll never caught that moment)."""
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
        time.sleep(interval if first_lease is None or interval_after_first is None else interval_after_first)


# --- report pages and bench corpora -----------------------------------------------------------------


@dataclass
class PageSet:
    """One kind of page: its URLs (requested in turn) and a check of each answer's body."""

    kind: str
    urls: list[str]
    check: Callable[[str, Any], str | None]
    timings: list[float] = field(default_factory=list)
    by_url: dict[str, list[float]] = field(default_factory=dict)


def pages_measure(page_set: PageSet, requests: int, token: str) -> None:
    """One warming pass over the URLs, then max(`requests`, URLs) timed GETs through Django's whole stack."""
    import json

    from django.test import Client

    page_set.timings.clear()
    page_set.by_url.clear()
    client = Client()

    def get(url: str) -> float:
        began = time.perf_counter()
        response = client.get(url, HTTP_X_SERVICE_TOKEN=token)
        elapsed = (time.perf_counter() - began) * 1000
        if response.status_code != 200:
            fail(f"GET {url} answered {response.status_code}: {response.content[:300]!r}")
        problem = page_set.check(url, json.loads(response.content))
        if problem:
            fail(f"GET {url}: {problem}")
        return elapsed

    for url in page_set.urls:
        get(url)
    for index in range(max(requests, len(page_set.urls))):
        url = page_set.urls[index % len(page_set.urls)]
        elapsed = get(url)
        page_set.timings.append(elapsed)
        page_set.by_url.setdefault(url, []).append(elapsed)


def corpus_insert(
    cursor: Any,
    *,
    name: str,
    description: str,
    service_ids: Sequence[int],
    actor: str,
    documents: int,
    prefix: str,
    digits: int,
) -> int:
    """A ready corpus under CORPUS_ROOT with `documents` generated .tex documents named prefix + a
    zero-padded number, activated for `service_ids` (no tasks yet), in one set-based INSERT each.
    Returns the corpus id."""
    cursor.execute(
        "INSERT INTO corpora_corpus (name, path, description, state, created_at, imported_at)"
        " VALUES (%s, %s, %s, 'ready', now(), now()) RETURNING id",
        [name, str(CORPUS_ROOT / name), description],
    )
    corpus_id = cursor.fetchone()[0]
    for service_id in service_ids:
        cursor.execute(
            "INSERT INTO corpora_activation (corpus_id, service_id, actor, created_at) VALUES (%s, %s, %s, now())",
            [corpus_id, service_id, actor],
        )
    cursor.execute(
        "INSERT INTO corpora_document (corpus_id, name, entry, kind, main_file, created_at)"
        " SELECT %s, n, n || '.tex', 'tex', n || '.tex', now()"
        " FROM (SELECT %s || lpad(g::text, %s, '0') AS n FROM generate_series(0, %s - 1) g) s ORDER BY n",
        [corpus_id, prefix, digits, documents],
    )
    return corpus_id
