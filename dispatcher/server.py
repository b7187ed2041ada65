"""The dispatcher: a ROUTER (ventilator) hands out tasks, a PULL (sink) takes results back.

Two processes. This one, the ventilator, claims leases in batches when workers ask, has payloads packed
on a small thread pool (a huge or slow entry never holds up the loop) and sends them, reaps expired
leases on a timer and writes worker tallies and counters once a second. The sink
(`dispatcher.sink`), forked at start, receives results and ingests them in batches on the other
CPU; after each drain it reports through a pipe what arrived, which keeps the in-flight count here.
Either process stops the other when it ends: the sink watches for the ventilator's death, and the
ventilator exits with an error when the sink dies. Anything a peer sends that does not fit the protocol
is counted and ignored: neither loop dies of it.

Our workers ask with the tag PROFILE_TAG after the service's name (conversion.wire) and get the
service's converter profile with each task, as the service has it when the task is handed out (the
services, profiles included, are read again every second); a CorTeX request of one frame gets CorTeX's
reply, unchanged.

Our workers also send heartbeats to the ventilator (conversion.worker.Heartbeat): they say which task
each worker thread converts, carry its tallies and the versions its engines reported, which are written
to the worker rows, and the versions to the open runs of the services they serve (corpora.pairs). When
a worker that sent heartbeats falls silent for `worker_silence_seconds`, the leases of the tasks it held
end at once and the reaper gives them back (the attempt counted). A worker that never sent one (an
unmodified CorTeX worker) keeps the plain lease timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import random
import signal
import time
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import zmq
from django.conf import settings
from django.db import connections, transaction
from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLWrapper
from django.utils import timezone

from config.live import config_refresh, get_config
from config.outage import database_down
from config.transient import connections_reset, transient_reason
from conversion.archive import PAYLOAD_MAX_BYTES, SourceRefused, pack_entry
from conversion.choices import InfrastructureReason, KillReason
from conversion.engine import VERSION_MAX_CHARS
from conversion.profiles import PATH_MAX_CHARS, profile_load
from conversion.wire import (
    HEARTBEAT_TAG,
    NO_WORK,
    NO_WORK_WITH_PROFILE,
    PROFILE_TAG,
    heartbeat_decode,
    split_frames,
)
from corpora.grains import grains_clear
from corpora.pairs import runs_close_drained, runs_engine_versions_note
from corpora.queries.corpora import task_names
from corpora.queries.reports import runtime_p99s
from corpora.task_changes import (
    LeasedTask,
    lease_batch,
    lease_release,
    leased_count,
    leases_expire,
    leases_expire_unclaimed,
    leases_extend,
    leases_invalidate,
    leases_reap,
    still_leased,
)
from dispatcher.sink import SinkReport, sink_main
from services.actions import (
    dispatcher_state_beat,
    dispatcher_state_start,
    in_flight_replace,
    workers_heartbeat,
    workers_tally_add,
)
from services.models import Service
from services.queries import effective_lease_seconds, in_flight_held

logger = logging.getLogger(__name__)

# The reasons a heartbeat may count kills under (any other is dropped).
_KILL_REASONS = frozenset(reason.value for reason in KillReason)
DRY_SECONDS = 0.25
SINK_START_SECONDS = 30
SINK_STOP_SECONDS = 60
# Threads that read and compress payloads: zlib and file reads release the GIL, and two keep one huge entry
# from holding up every other one on this two-CPU design.
PACK_THREADS = 2
# A lone .tex file is packed on the loop itself while it reads no more than this: a handful of system calls
# and a small compression, where a hand-over to a packing thread costs the loop more than the packing.
# A bigger one goes to a packing thread (the part read is read again there).
INLINE_PACK_BYTES = 256 * 1024
# While the database is away, the loop asks whether it answers again after these waits (doubling), and
# answers "no work" meanwhile.
OUTAGE_FIRST_WAIT_SECONDS = 0.5
OUTAGE_MAX_WAIT_SECONDS = 5.0


class SinkFailed(RuntimeError):
    """The sink process could not start, or died."""


_MAX_SERVICE_NAME = 200
# After a start, the leases an earlier dispatcher gave that no live worker's heartbeat claims within this
# time are given back: three heartbeats (conversion.worker.HEARTBEAT_SECONDS) of every live worker.
UNCLAIMED_GRACE_SECONDS = 30.0
# Leases held by live workers that would end within this time are renewed, checked this often.
LEASE_RENEW_WITHIN_SECONDS = 30
LEASE_RENEW_EVERY_SECONDS = 1.0
# A task the machine ended on one worker goes to another that asked for the service within this time,
# rather than back to the same worker; with no other asking, the same worker gets it (it may be the only
# one). Idle workers ask every half second (conversion.worker.NO_WORK_MAX_WAIT_SECONDS).
ELSEWHERE_ASKED_SECONDS = 5.0
# How far into a service's queue a worker is looked past tasks it last held, for one it did not.
ELSEWHERE_SCAN = 64
# How often the services' 99th percentile runtimes are read again, for the in-flight rows.
P99_EVERY_SECONDS = 60.0
# What a heartbeat may name: services served, engines with their versions.
_MAX_BEAT_SERVICES = 32
_MAX_BEAT_ENGINES = 16


@dataclass(frozen=True)
class ServiceEntry:
    """A service as the ventilator hands out its tasks: its id, the lease its tasks get, its converter
    profile as the wire carries it (canonical JSON) and the engine the profile names."""

    id: int
    lease_seconds: int
    profile: bytes
    engine: str


@dataclass
class Counters:
    leased: int = 0
    dispatched: int = 0
    ingested: int = 0
    discarded: int = 0
    garbage: int = 0
    reaped: int = 0
    failed_for_retries: int = 0
    released: int = 0
    retried: int = 0


@dataclass
class Beat:
    """What the dispatcher knows of one worker process that sends heartbeats."""

    last: float  # monotonic time of its last heartbeat
    service: str = ""
    tasks: set[int] = field(default_factory=set)  # the tasks it holds, as far as the dispatcher knows
    sent: set[int] = field(default_factory=set)  # handed to it since its last heartbeat
    services: list[str] = field(default_factory=list)  # the services it serves
    engines: dict[str, str] = field(default_factory=dict)  # profile engine -> the version it reported
    # thread identity -> (conversions, peak resident bytes, kills by reason), when it changed since the last write
    tallies: dict[str, tuple[int, int, dict[str, int]]] = field(default_factory=dict)
    at: object = None  # wall time of the last heartbeat, for the worker rows


@dataclass
class Flying:
    """A task a worker that sends heartbeats holds: what the in-flight table (services.models.InFlight) shows."""

    worker: str
    thread: str
    since: object  # wall time the worker took it
    heartbeat_at: object  # wall time of its worker's last heartbeat
    timeout: float | None = None
    service_id: int | None = None
    corpus: str | None = None  # read once, at the next flush
    document: str | None = None


@dataclass
class Tally:
    first_seen: datetime
    last_seen: datetime
    dispatched: int = 0
    returned: int = 0


@dataclass
class DispatcherConfig:
    bind: str
    ventilator_port: int
    sink_port: int
    message_size: int
    max_in_flight: int
    max_attempts: int
    lease_batch: int
    result_batch: int
    reap_seconds: int
    corpus_roots: list[Path] = field(default_factory=list)
    worker_silence_seconds: int = 60
    longest_first: bool = True  # the lease order (corpora.task_changes.lease_batch)
    payload_max_bytes: int = PAYLOAD_MAX_BYTES
    # Follow the live configuration keys (config.live.get_config) while running: set when made from the settings.
    live: bool = False

    @classmethod
    def from_settings(cls) -> DispatcherConfig:
        live = get_config()
        return cls(
            bind=settings.DISPATCHER_BIND,
            ventilator_port=settings.DISPATCHER_VENTILATOR_PORT,
            sink_port=settings.DISPATCHER_SINK_PORT,
            message_size=settings.DISPATCHER_MESSAGE_SIZE,
            max_in_flight=live.DISPATCHER_MAX_IN_FLIGHT,
            max_attempts=live.DISPATCHER_MAX_ATTEMPTS,
            lease_batch=live.DISPATCHER_LEASE_BATCH,
            result_batch=settings.DISPATCHER_RESULT_BATCH,
            reap_seconds=live.DISPATCHER_REAP_SECONDS,
            worker_silence_seconds=live.DISPATCHER_WORKER_SILENCE_SECONDS,
            longest_first=live.DISPATCHER_LONGEST_FIRST,
            corpus_roots=list(settings.CORPUS_ROOTS),
            payload_max_bytes=settings.PAYLOAD_MAX_BYTES,
            live=True,
        )

    def follow_live(self) -> None:
        """Take the live keys' current values (the ports, sizes and the sink's batch need a restart)."""
        live = get_config()
        self.max_in_flight = live.DISPATCHER_MAX_IN_FLIGHT
        self.max_attempts = live.DISPATCHER_MAX_ATTEMPTS
        self.lease_batch = live.DISPATCHER_LEASE_BATCH
        self.reap_seconds = live.DISPATCHER_REAP_SECONDS
        self.worker_silence_seconds = live.DISPATCHER_WORKER_SILENCE_SECONDS
        self.longest_first = live.DISPATCHER_LONGEST_FIRST


@dataclass
class Dispatcher:
    config: DispatcherConfig
    counters: Counters = field(default_factory=Counters)
    # A positive lease mark of this run: leased tasks carry it as their status.
    mark: int = field(default_factory=lambda: random.randint(1, 2**31 - 1))  # noqa: S311
    stopping: bool = False

    def __post_init__(self) -> None:
        self.queues: dict[str, deque[LeasedTask]] = defaultdict(deque)
        self.tallies: dict[tuple[str, int], Tally] = {}
        self.services: dict[str, ServiceEntry] = {}  # by name, refreshed each second
        # name -> monotonic time until which the service is taken to have no TODO task: a lease that came
        # back short means the service ran dry, and idle workers asking again at once need no SQL to hear
        # "no work". New tasks (activation, rerun, resume) wait at most DRY_SECONDS for it.
        self.dry_until: dict[str, float] = {}
        # service name -> worker -> monotonic time it last asked for the service: who else could take a retry
        self.asked: dict[str, dict[str, float]] = defaultdict(dict)
        self.in_flight = 0  # handed out and not yet returned (or reaped)
        # Leases run on a thread of their own (with its own database connection), one batch ahead.
        self.lease_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dispatcher-lease")
        self.leasing: dict[str, tuple[Future[list[LeasedTask]], int]] = {}  # service name -> (lease, limit)
        # Payloads are packed on their own threads; a finished packing lands in `packed` and wakes the loop
        # through a pipe, and the loop sends it (ZeroMQ sockets are not shared between threads).
        self.pack_threads = ThreadPoolExecutor(max_workers=PACK_THREADS, thread_name_prefix="dispatcher-pack")
        # (identity, service name, task, the payload or what packing raised, the profile to send with it or
        # None for a CorTeX request)
        self.packed: deque[tuple[bytes, str, LeasedTask, bytes | BaseException, bytes | None]] = deque()
        self.packed_wake, self.packed_signal = os.pipe()
        os.set_blocking(self.packed_wake, False)
        os.set_blocking(self.packed_signal, False)
        self.wake_sent = False  # a byte is in the pipe that the loop has not taken yet: no need for another
        # Workers that send heartbeats: name -> Beat; the worker thread identities they named -> the name;
        # and the holder of each task they hold, so that a task handed on meanwhile is not taken back.
        self.beats: dict[str, Beat] = {}
        self.beating: dict[bytes, str] = {}
        self.holders: dict[int, str] = {}
        # What the heartbeat senders convert, by task, written to the in-flight table when it changed; read
        # back at start, so that a restarted dispatcher knows whose leases are held.
        self.flying: dict[int, Flying] = {}
        self.flying_changed = False
        self.p99s: dict[int, int] = {}
        self.p99s_read = self.leases_renewed = 0.0
        self.unclaimed_after: float | None = None  # when to give back the unclaimed leases of earlier runs
        self.sink_process: multiprocessing.process.BaseProcess | None = None
        self.sink_stopped: str | None = None  # why the sink stopped, from its last report
        self.results_held = False  # the sink holds results back (a full results disk): no work is handed out
        # A database outage: when it began (monotonic; None while the database answers), the next time to ask
        # whether it is back, and the wait before the time after.
        self.outage_since: float | None = None
        self.outage_retry_at = 0.0
        self.outage_wait = OUTAGE_FIRST_WAIT_SECONDS

    # --- sockets and the loop ------------------------------------------------------------------

    def open(self) -> None:
        """Fork the sink (before this process touches ZeroMQ or the database), then bind the ventilator."""
        connections.close_all()  # the sink must not inherit this process's database connections
        fork = multiprocessing.get_context("fork")
        self.sink_reports, writer = fork.Pipe(duplex=False)
        self.sink_process = fork.Process(
            target=sink_main, name="dispatcher-sink", daemon=True,
            kwargs={"bind": self.config.bind, "port": self.config.sink_port, "result_batch": self.config.result_batch,
                    "reports": writer, "parent_pid": os.getpid()},
        )  # fmt: skip
        self.sink_process.start()
        writer.close()
        if not self.sink_reports.poll(SINK_START_SECONDS):
            self._sink_stop()
            raise SinkFailed(f"the sink process did not start within {SINK_START_SECONDS} s")
        try:
            hello = self.sink_reports.recv()
        except EOFError:
            raise SinkFailed(f"the sink process exited with {self.sink_process.exitcode} at start") from None
        if hello.error:
            self._sink_stop()
            raise zmq.ZMQError(zmq.EADDRINUSE, hello.error)
        self.context = zmq.Context()
        self.ventilator = self.context.socket(zmq.ROUTER)
        self.ventilator.setsockopt(zmq.LINGER, 0)
        self.ventilator.setsockopt(zmq.RCVHWM, 100_000)
        self.ventilator.setsockopt(zmq.ROUTER_MANDATORY, 0)
        try:
            self.ventilator.bind(f"tcp://{self.config.bind}:{self.config.ventilator_port}")
        except zmq.ZMQError:
            self.ventilator.close(0)
            self._sink_stop()
            raise
        # The holders first: the state row is what tells the world this dispatcher serves, and from then on a
        # database that goes away is ridden out by the serving loop, not by a start that is half done.
        self._holders_load()
        self.state = dispatcher_state_start(pid=os.getpid())
        logger.info(
            "dispatcher listening: ventilator %s:%s, sink %s:%s (process %s)",
            self.config.bind, self.config.ventilator_port, self.config.bind, self.config.sink_port,
            self.sink_process.pid,
        )  # fmt: skip

    def close(self) -> None:
        """Let the sink ingest what it holds, give back leased tasks that never left, write the counters."""
        exitcode = self._sink_stop()
        self.stopping = True  # a refused entry's worker is told "no work" rather than given another task
        self.pack_threads.shutdown(wait=True)
        self._wake_clear()
        self._take_packed()
        os.close(self.packed_wake)
        os.close(self.packed_signal)
        for name in list(self.leasing):
            with contextlib.suppress(Exception):  # a failed lease leased nothing
                self._leases_take(name, wait=True)
        self.lease_thread.submit(connections.close_all).result()
        self.lease_thread.shutdown()
        unsent = [task.id for queue in self.queues.values() for task in queue]
        released = lease_release(unsent, mark=self.mark)
        self.queues.clear()
        self._flush()
        self.ventilator.close(0)
        self.context.term()
        logger.info("dispatcher stopped; %d unsent leases given back; sink exit code %s", released, exitcode)

    def _sink_stop(self) -> int | None:
        """SIGTERM the sink, wait for it to ingest what it holds and exit, and take its last reports."""
        process = self.sink_process
        if process is None:
            return None
        if process.is_alive():
            process.terminate()
        process.join(SINK_STOP_SECONDS)
        if process.is_alive():
            logger.error("the sink did not stop within %s s; killing it", SINK_STOP_SECONDS)
            process.kill()
            process.join(5)
        self._take_sink_reports()
        return process.exitcode

    def run(self, *, until: float | None = None) -> None:
        poller = zmq.Poller()
        poller.register(self.ventilator, zmq.POLLIN)
        poller.register(self.sink_reports.fileno(), zmq.POLLIN)
        poller.register(self.packed_wake, zmq.POLLIN)
        next_flush = next_reap = time.monotonic()
        try:
            self._refresh_services()
        except Exception as exc:
            if transient_reason(exc) is None:
                raise
            self._database_lost(exc)
        while not self.stopping and (until is None or time.monotonic() < until):
            events = dict(poller.poll(100))
            if self.sink_reports.fileno() in events:
                self._take_sink_reports()
            if self.packed_wake in events:
                self._wake_clear()
            if self.ventilator in events:
                self._drain_ventilator()
            if self.packed:  # packed on a thread, or on the loop while it answered
                self._take_packed()
            now = time.monotonic()
            # While the database is away, the timers wait for it and workers are answered "no work" (`_next_task`).
            database = self.outage_since is None or (
                now >= self.outage_retry_at and self._database_back(self.outage_since)
            )
            try:
                if database and now >= next_reap:
                    self._reap()
                    next_reap = now + self.config.reap_seconds
                if database and now >= next_flush:
                    self._release_silent(now)
                    self._release_unclaimed(now)
                    self._flush()
                    self._refresh_services()
                    self._prune_queues()
                    if self.config.live and config_refresh():
                        self.config.follow_live()
                    next_flush = now + 1.0
            except Exception as exc:
                if transient_reason(exc) is None:
                    raise
                self._database_lost(exc)
            # Told to stop (a group's SIGTERM reaches the sink too), its exit is part of the stop.
            sink = self.sink_process
            if not self.stopping and (sink is None or not sink.is_alive()):
                self._take_sink_reports()
                why = f"; {self.sink_stopped}" if self.sink_stopped else ""
                raise SinkFailed(f"the sink process died (exit code {sink.exitcode if sink else None}{why})")

    def _database_lost(self, exc: Exception) -> None:
        """A transient database error (the server went away, a connection was ended): drop this thread's and
        the leasing thread's connections, stop leasing and ask again after a growing wait. Said once an outage."""
        now = time.monotonic()
        if self.outage_since is None:
            self.outage_since, self.outage_wait = now, OUTAGE_FIRST_WAIT_SECONDS
            logger.warning("the database is away (%s); workers get no work until it answers", transient_reason(exc))
        else:
            self.outage_wait = min(self.outage_wait * 2, OUTAGE_MAX_WAIT_SECONDS)
        self.outage_retry_at = now + self.outage_wait
        connections_reset()
        self.lease_thread.submit(connections_reset)  # connections are per thread: the leasing thread's own

    def _database_back(self, since: float) -> bool:
        """Whether the database, away since `since` (monotonic), answers again (a probe of its own, which does not
        wait for a pool); if not, the wait before the next question grows."""
        if database_down() is not None:
            self.outage_wait = min(self.outage_wait * 2, OUTAGE_MAX_WAIT_SECONDS)
            self.outage_retry_at = time.monotonic() + self.outage_wait
            return False
        for conn in connections.all(initialized_only=True):
            if isinstance(conn, PostgreSQLWrapper) and conn.pool is not None:
                # A pool that failed to reconnect for a while waits long between its tries: start a new one.
                conn.close_pool()
        logger.warning("the database answers again after %.1f s", time.monotonic() - since)
        self.outage_since = None
        return True

    def _take_sink_reports(self) -> None:
        try:
            while self.sink_reports.poll():
                self._apply(self.sink_reports.recv())
        except (EOFError, OSError):  # the sink is gone; run() notices and stops
            return

    def _apply(self, report: SinkReport) -> None:
        self.sink_stopped = report.stopped or self.sink_stopped
        if report.held is not None:
            self.results_held = report.held
        self.in_flight = max(self.in_flight - report.received, 0)
        self.counters.ingested += report.ingested
        self.counters.discarded += report.discarded
        self.counters.retried += report.retried
        self.counters.garbage += report.garbage
        for (identity, service_name), returned in report.returned.items():
            service = self.services.get(service_name)
            if service is None:
                continue
            tally = self._tally_of((identity, service.id), returned.first_seen, returned.last_seen)
            tally.returned += returned.count
            tally.first_seen = min(tally.first_seen, returned.first_seen)
            tally.last_seen = max(tally.last_seen, returned.last_seen)

    # --- ventilator: hand out work ---------------------------------------------------------------

    def _drain_ventilator(self) -> None:
        for _ in range(200):  # then let the timers and the sink's reports have a turn
            try:
                frames = self.ventilator.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._answer(frames)

    def _answer(self, frames: list[bytes]) -> None:
        identity = frames[0]
        request = frames[1:]
        if len(request) == 2 and request[0] == HEARTBEAT_TAG:
            self._heartbeat(request[1])  # not answered: the heartbeat socket asks for nothing
            return
        with_profile = len(request) == 2 and request[1] == PROFILE_TAG
        no_work = NO_WORK_WITH_PROFILE if with_profile else NO_WORK
        if not (len(request) == 1 or with_profile) or not request[0] or len(request[0]) > _MAX_SERVICE_NAME:
            self.counters.garbage += 1
            self._send(identity, no_work)
            return
        try:
            service_name = request[0].decode()
        except UnicodeDecodeError:
            self.counters.garbage += 1
            self._send(identity, no_work)
            return
        self._hand_out(identity, service_name, with_profile=with_profile)

    def _hand_out(self, identity: bytes, service_name: str, *, with_profile: bool = False) -> None:
        """Answer "no work", or lease a task and have it packed; `_take_packed` sends it once packed, with
        the service's profile as it is now when the worker asked for it."""
        task = None if self.stopping or self.results_held else self._next_task(service_name, identity)
        if task is None:
            self._send(identity, NO_WORK_WITH_PROFILE if with_profile else NO_WORK)
            return
        profile = self.services[service_name].profile if with_profile else None
        self.in_flight += 1  # counted from now, so that packings under way keep to max_in_flight
        if task.kind == "tex" and self.config.payload_max_bytes > INLINE_PACK_BYTES:
            outcome: bytes | Exception | None
            try:
                outcome = pack_entry(
                    task.path, task.kind, task.entry, roots=self.config.corpus_roots, max_bytes=INLINE_PACK_BYTES
                )
            except SourceRefused as exc:
                outcome = None if exc.what == "too_large" else exc
            except Exception as exc:
                outcome = exc
            if outcome is not None:  # sent once the ventilator is drained
                self.packed.append((identity, service_name, task, outcome, profile))
                return
        future = self.pack_threads.submit(
            pack_entry, task.path, task.kind, task.entry,
            roots=self.config.corpus_roots, max_bytes=self.config.payload_max_bytes,
        )  # fmt: skip
        future.add_done_callback(lambda done: self._packed_put(identity, service_name, task, done, profile))

    def _packed_put(
        self, identity: bytes, service_name: str, task: LeasedTask, future: Future[bytes], profile: bytes | None
    ) -> None:
        """On a packing thread: queue the finished packing and wake the loop."""
        error = future.exception()
        self.packed.append((identity, service_name, task, future.result() if error is None else error, profile))
        if not self.wake_sent:
            self.wake_sent = True
            with contextlib.suppress(BlockingIOError):  # the pipe is full: the loop is awake anyway
                os.write(self.packed_signal, b"\0")

    def _wake_clear(self) -> None:
        """Take the wake bytes of packing threads, before the packings they announce are taken."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.packed_wake, 4096):
                pass
        # Cleared after the pipe is drained and before the queue is: a packing that lands after the last
        # pop sees it clear and writes a new byte.
        self.wake_sent = False

    def _take_packed(self) -> None:
        """Send finished payloads. An entry refused at packing (a link out of the corpus roots, over the
        size limit, a damaged archive) makes its task invalid at once and its worker is given the next
        task; one that cannot be read now keeps its lease, which runs out, and the reaper retries it."""
        while self.packed:  # refused tasks' workers are handed out again, maybe packed on the loop at once
            refused: list[tuple[int, str, str]] = []
            again: list[tuple[bytes, str, bool]] = []
            while self.packed:
                identity, service_name, task, outcome, profile = self.packed.popleft()
                if isinstance(outcome, bytes):
                    head = [str(task.id).encode()] if profile is None else [str(task.id).encode(), profile]
                    self._send(identity, [*head, *split_frames(outcome, self.config.message_size)])
                    self.counters.dispatched += 1
                    self._tally(identity, task.service_id).dispatched += 1
                    worker = self.beating.get(identity)
                    if worker is not None:  # held from now, before its heartbeat says so
                        self.beats[worker].sent.add(task.id)
                        self.holders[task.id] = worker
                        now = timezone.now()
                        self.flying[task.id] = Flying(
                            worker, identity.decode(errors="replace"), now, self.beats[worker].at or now,
                            service_id=task.service_id,
                        )  # fmt: skip
                        self.flying_changed = True
                    continue
                self.in_flight = max(self.in_flight - 1, 0)
                if isinstance(outcome, SourceRefused):
                    logger.warning("task %s (%s) is invalid: %s: %s", task.id, task.path, outcome.what, outcome)
                    refused.append((task.id, outcome.what, str(outcome)))
                    again.append((identity, service_name, profile is not None))
                else:  # OSError above all: the document cannot be read now
                    logger.warning("cannot pack task %s (%s): %s", task.id, task.path, outcome)
                    self._send(identity, NO_WORK if profile is None else NO_WORK_WITH_PROFILE)
            if refused:
                with transaction.atomic():
                    pairs = leases_invalidate(refused, mark=self.mark)
                    runs_close_drained(pairs)
                grains_clear(pairs)
                for identity, service_name, with_profile in again:
                    self._hand_out(identity, service_name, with_profile=with_profile)

    def _send(self, identity: bytes, frames: list[bytes]) -> None:
        try:
            self.ventilator.send_multipart([identity, *frames], zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # the peer went away or its queue is full: drop the reply
            logger.debug("could not answer %r: %s", identity, exc)

    def _next_task(self, service_name: str, identity: bytes = b"") -> LeasedTask | None:
        if self.in_flight >= self.config.max_in_flight or self.outage_since is not None:
            return None
        service = self.services.get(service_name)
        if service is None:
            return None
        queue = self.queues[service_name]
        self._leases_take(service_name)
        if len(queue) <= self.config.lease_batch // 2:
            # Lease the next batch on the leasing thread while this one is handed out: the workers would
            # otherwise wait for every lease statement (tens of ms per batch).
            self._lease_ahead(service_name, service)
        if not queue:
            self._leases_take(service_name, wait=True)
        return self._pick(service_name, queue, identity) if queue else None

    def _worker_of(self, identity: str) -> str:
        """The worker process a thread identity belongs to, where its heartbeats said; else the identity."""
        return self.beating.get(identity.encode(errors="replace"), identity)

    def _pick(self, service_name: str, queue: deque[LeasedTask], identity: bytes) -> LeasedTask | None:
        """The next queued task for the worker thread `identity`: the first one the machine did not end last
        on this worker. A task it did end there waits for another worker that asked for the service within
        ELSEWHERE_ASKED_SECONDS; with none, this worker gets it (docs/decisions/infrastructure-failures.md)."""
        name = identity.decode(errors="replace")
        worker = self._worker_of(name)
        now = time.monotonic()
        askers = self.asked[service_name]
        askers[worker] = now
        for index, task in enumerate(itertools.islice(queue, ELSEWHERE_SCAN)):
            if task.last_worker is None or self._worker_of(task.last_worker) != worker:
                del queue[index]
                return task
        others = any(now - at <= ELSEWHERE_ASKED_SECONDS for other, at in askers.items() if other != worker)
        if len(askers) > 1:  # forget workers that have not asked for long, so the map stays small
            for other in [other for other, at in askers.items() if now - at > ELSEWHERE_ASKED_SECONDS]:
                del askers[other]
        return None if others and len(queue) <= ELSEWHERE_SCAN else queue.popleft()

    def _lease_ahead(self, service_name: str, service: ServiceEntry) -> None:
        """Start a lease for the service on the leasing thread unless one is running or it ran dry."""
        if service_name in self.leasing or time.monotonic() < self.dry_until.get(service_name, 0.0):
            return
        queued = sum(len(queue) for queue in self.queues.values())
        limit = min(self.config.lease_batch, self.config.max_in_flight - self.in_flight - queued)
        if limit <= 0:
            return
        future = self.lease_thread.submit(
            lease_batch,
            service_id=service.id,
            limit=limit,
            mark=self.mark,
            lease_seconds=service.lease_seconds,
            longest_first=self.config.longest_first,
        )
        self.leasing[service_name] = (future, limit)

    def _leases_take(self, service_name: str | None = None, *, wait: bool = False) -> None:
        """Queue the tasks of finished leases (of one service, or all); `wait` waits for a running one."""
        for name in [service_name] if service_name is not None else list(self.leasing):
            running = self.leasing.get(name)
            if running is None or not (wait or running[0].done()):
                continue
            del self.leasing[name]
            future, limit = running
            try:
                batch = future.result()
            except Exception as exc:  # a transient error waits for the database (a lease it made comes back reaped)
                if transient_reason(exc) is None:
                    raise
                self._database_lost(exc)
                continue
            self.counters.leased += len(batch)
            self.queues[name].extend(batch)
            if len(batch) < limit:
                self.dry_until[name] = time.monotonic() + DRY_SECONDS

    # --- heartbeats ------------------------------------------------------------------------------

    def _heartbeat(self, data: bytes) -> None:
        """Take one worker's heartbeat: the tasks its threads convert now, and their tallies."""
        try:
            message = heartbeat_decode(data)
            worker = str(message["worker"])[:200]
            service = str(message.get("service", ""))[:200]
            threads = message["threads"]
            served = message.get("services") or [service]
            engines = message.get("engines") or {}
            if not isinstance(served, list) or not isinstance(engines, dict):
                raise TypeError("services is a list, engines an object")
            services = [str(name)[:_MAX_SERVICE_NAME] for name in served[:_MAX_BEAT_SERVICES]]
            versions = {str(name)[:PATH_MAX_CHARS]: str(version)[:VERSION_MAX_CHARS]
                        for name, version in list(engines.items())[:_MAX_BEAT_ENGINES]}  # fmt: skip
            current: dict[str, tuple[int | None, int, int, dict[str, int]]] = {}
            timing: dict[str, tuple[float | None, float | None]] = {}  # thread -> (elapsed, timeout) seconds
            for name, thread in threads.items():
                task = thread.get("task")
                elapsed, limit = thread.get("elapsed"), thread.get("timeout")
                timing[str(name)[:200]] = (
                    max(0.0, float(elapsed)) if elapsed is not None else None,
                    float(limit) if limit is not None else None,
                )
                kills = {reason: max(0, int(count)) for reason, count in thread.get("kills", {}).items()
                         if reason in _KILL_REASONS}  # fmt: skip
                current[str(name)[:200]] = (
                    int(task) if task is not None else None, int(thread.get("conversions", 0)),
                    int(thread.get("peak_rss", 0)), kills,
                )  # fmt: skip
        except (ValueError, TypeError, KeyError, AttributeError):
            self.counters.garbage += 1
            return
        beat = self.beats.get(worker)
        if beat is None:
            beat = self.beats[worker] = Beat(last=0.0)
        beat.last, beat.service, beat.at = time.monotonic(), service, timezone.now()
        beat.services, beat.engines = services, versions
        held = {task for task, _, _, _ in current.values() if task is not None} | beat.sent
        for task in beat.tasks - held:
            if self.holders.get(task) == worker:
                del self.holders[task]
                self.flying.pop(task, None)
        for task in held:
            self.holders[task] = worker
        beat.tasks, beat.sent = held, set()
        for name, (task, _, _, _) in current.items():
            if task is None:
                continue
            elapsed, limit = timing[name]
            known = self.flying.get(task)
            since = beat.at - timedelta(seconds=elapsed) if elapsed is not None else (known.since if known else beat.at)
            self.flying[task] = Flying(
                worker, name, since, beat.at, limit, known.service_id if known else None,
                known.corpus if known else None, known.document if known else None,
            )  # fmt: skip
        for task in held:
            if task in self.flying:
                self.flying[task].heartbeat_at = beat.at
        self.flying_changed = True
        for name, (_, conversions, peak_rss, kills) in current.items():
            self.beating[name.encode()] = worker
            beat.tallies[name] = (conversions, peak_rss, kills)

    def _release_silent(self, now: float) -> None:
        """End the leases of the tasks held by workers whose heartbeats stopped, and reap them at once."""
        silent = [name for name, beat in self.beats.items() if now - beat.last > self.config.worker_silence_seconds]
        if not silent:
            return
        held: list[int] = []
        died: dict[int, tuple[str, str]] = {}  # task -> (its worker thread, why): the reaper notes both
        for name in silent:
            beat = self.beats.pop(name)
            for task in beat.tasks | beat.sent:
                if self.holders.get(task) == name:
                    del self.holders[task]
                    held.append(task)
                    flying = self.flying.pop(task, None)
                    died[task] = (
                        (flying.thread if flying is not None else name)[:200],
                        InfrastructureReason.WORKER_DIED,
                    )
                    self.flying_changed = True
            for identity in [identity for identity, worker in self.beating.items() if worker == name]:
                del self.beating[identity]
        released = leases_expire(held)
        self.counters.released += released
        logger.warning(
            "worker(s) %s sent no heartbeat for %s s: %d lease(s) given back", ", ".join(silent),
            self.config.worker_silence_seconds, released,
        )  # fmt: skip
        if released:
            self._reap(died)

    def _holders_load(self) -> None:
        """Take over what the last dispatcher knew of the leases held: each holder heard as long ago as its
        last heartbeat, so one that died with that dispatcher falls silent on time and its leases come back.
        Leases of earlier runs that no heartbeat claims go back after UNCLAIMED_GRACE_SECONDS."""
        now, wall = time.monotonic(), timezone.now()
        for row in in_flight_held():
            beat = self.beats.get(row.worker)
            heard = now - max((wall - row.heartbeat_at).total_seconds(), 0.0)
            if beat is None:
                beat = self.beats[row.worker] = Beat(last=heard, at=row.heartbeat_at)
            beat.last = max(beat.last, heard)
            beat.tasks.add(row.task_id)
            self.holders[row.task_id] = row.worker
            self.flying[row.task_id] = Flying(
                row.worker, row.thread, row.since, row.heartbeat_at, row.timeout_seconds, row.service_id, row.corpus,
                row.document,
            )  # fmt: skip
        self.unclaimed_after = now + UNCLAIMED_GRACE_SECONDS
        if self.beats:
            logger.info(
                "dispatcher: %d conversion(s) in flight on %d worker(s) when the last dispatcher stopped",
                len(self.holders), len(self.beats),
            )  # fmt: skip

    def _release_unclaimed(self, now: float) -> None:
        """Once, UNCLAIMED_GRACE_SECONDS after the start: end the leases of earlier runs that no live worker
        has claimed (their holders died, or the earlier dispatcher never sent them), and reap them."""
        if self.unclaimed_after is None or now < self.unclaimed_after:
            return
        self.unclaimed_after = None
        released = leases_expire_unclaimed(mark=self.mark, claimed=list(self.holders))
        if released:
            self.counters.released += released
            logger.warning(
                "%d lease(s) of an earlier dispatcher run claimed by no worker within %.0f s: given back",
                released, UNCLAIMED_GRACE_SECONDS,
            )  # fmt: skip
            self._reap()

    def _flush_in_flight(self) -> None:
        """Renew the leases live workers hold (every LEASE_RENEW_EVERY_SECONDS) and write the in-flight rows
        when they changed, with the names of new tasks and their services' 99th percentile runtimes."""
        now = time.monotonic()
        if now - self.leases_renewed >= LEASE_RENEW_EVERY_SECONDS:
            self.leases_renewed = now
            silence = self.config.worker_silence_seconds
            live = [task for task, worker in self.holders.items()
                    if (beat := self.beats.get(worker)) is not None and now - beat.last <= silence]  # fmt: skip
            leases_extend(live, within_seconds=LEASE_RENEW_WITHIN_SECONDS)
        if not self.flying_changed:
            return
        self.flying_changed = False
        unnamed = [task for task, row in self.flying.items() if row.corpus is None]
        if unnamed:
            names = task_names(unnamed)
            for task in unnamed:
                if task not in names:  # deleted meanwhile: nothing to show
                    del self.flying[task]
                    continue
                row = self.flying[task]
                row.service_id, row.corpus, row.document = names[task]
        if now - self.p99s_read >= P99_EVERY_SECONDS:
            self.p99s_read = now
            self.p99s = runtime_p99s(
                sorted({row.service_id for row in self.flying.values() if row.service_id is not None})
            )
        in_flight_replace([
            (task, row.service_id, row.corpus, row.document, row.worker, row.thread, row.since, row.heartbeat_at,
             row.timeout, None if row.service_id is None else self.p99s.get(row.service_id))
            for task, row in self.flying.items()
        ])  # fmt: skip

    # --- timers ----------------------------------------------------------------------------------

    def _reap(self, interrupted: dict[int, tuple[str, str]] | None = None) -> None:
        """Reap expired leases; `interrupted` names the holder and reason of those the caller ended."""
        self._leases_take(wait=True)  # so that the recount below sees every leased task queued
        with transaction.atomic():
            reaped = leases_reap(max_attempts=self.config.max_attempts, interrupted=interrupted)
            runs_close_drained(reaped.pairs)
        self.counters.reaped += reaped.returned + reaped.fatal
        self.counters.failed_for_retries += reaped.fatal
        # Reaped tasks are no longer in flight anywhere; recount from the database to stay honest.
        if reaped.returned or reaped.fatal:
            queued = sum(len(q) for q in self.queues.values())
            self.in_flight = max(leased_count(mark=self.mark) - queued, 0)

    def _prune_queues(self) -> None:
        """Drop queued tasks that are no longer leased by us (paused, deleted) so they are not sent."""
        queued = [task.id for queue in self.queues.values() for task in queue]
        if not queued:
            return
        still = still_leased(queued, mark=self.mark)
        for name, queue in self.queues.items():
            self.queues[name] = deque(task for task in queue if task.id in still)

    def _refresh_services(self) -> None:
        """The services with their leases and profiles as they are now: a changed profile goes out with the
        next task handed out (a task a worker converts keeps the profile it came with)."""
        entries = {}
        for service in Service.objects.all():
            profile = profile_load(service.profile)
            entries[service.name] = ServiceEntry(
                service.pk, effective_lease_seconds(service), profile.canonical().encode(), profile.engine
            )
        self.services = entries

    def _tally(self, identity: bytes, service_id: int) -> Tally:
        now = timezone.now()
        tally = self._tally_of((identity.decode(errors="replace")[:200], service_id), now, now)
        tally.last_seen = now
        return tally

    def _tally_of(self, key: tuple[str, int], first_seen: datetime, last_seen: datetime) -> Tally:
        """The worker's tally since the last flush; a new one seen first and last at the times given."""
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = Tally(first_seen=first_seen, last_seen=last_seen)
        return tally

    def _flush(self) -> None:
        """Write worker tallies (one upsert) and the counters/heartbeat row."""
        tallies, self.tallies = self.tallies, {}
        if tallies:
            keys = list(tallies)
            workers_tally_add(
                identities=[k[0] for k in keys], service_ids=[k[1] for k in keys],
                dispatched=[tallies[k].dispatched for k in keys], returned=[tallies[k].returned for k in keys],
                first_seen=[tallies[k].first_seen for k in keys], last_seen=[tallies[k].last_seen for k in keys],
            )  # fmt: skip
        self._flush_beats()
        self._flush_in_flight()
        c = self.counters
        dispatcher_state_beat(
            self.state.pk, leased=c.leased, dispatched=c.dispatched, ingested=c.ingested,
            discarded=c.discarded, garbage=c.garbage, reaped=c.reaped, failed_for_retries=c.failed_for_retries,
            released=c.released, retried=c.retried,
        )  # fmt: skip

    def _flush_beats(self) -> None:
        """Write the tallies heartbeats brought since the last flush (one upsert): as the worker reported
        them, counted since its process started, on the row of each service it serves, with the engine of
        that service's profile and the version the worker reported for it. The versions go to the open runs
        of those services too (corpora.pairs.runs_engine_versions_note)."""
        rows = []
        versions: dict[int, set[str]] = defaultdict(set)
        for beat in self.beats.values():
            for service_name in beat.services or [beat.service]:
                service = self.services.get(service_name)
                if service is None:
                    continue
                version = beat.engines.get(service.engine)
                if version is not None and beat.tallies:
                    versions[service.id].add(version)
                rows += [(name, service.id, *tally, beat.at, service.engine, version)
                         for name, tally in beat.tallies.items()]  # fmt: skip
            beat.tallies = {}
        if not rows:
            return
        identities, service_ids, conversions, peaks, kills, times, engines, engine_versions = (
            list(column) for column in zip(*rows, strict=True)
        )
        workers_heartbeat(
            identities=identities, service_ids=service_ids, conversions=conversions, peaks=peaks, kills=kills,
            times=times, engines=engines, engine_versions=engine_versions,
        )  # fmt: skip
        runs_engine_versions_note(versions)


def dispatcher_serve(config: DispatcherConfig | None = None) -> None:
    """Run the dispatcher until SIGTERM or SIGINT."""
    config_refresh(force=True)  # live values changed since the settings were read, before they are used
    for conn in connections.all():  # the sink is forked next: it must not inherit a pool with its threads
        conn.close()
        if hasattr(conn, "close_pool"):
            conn.close_pool()
    dispatcher = Dispatcher(config or DispatcherConfig.from_settings())

    def stop(signum: int, frame: object) -> None:
        dispatcher.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    dispatcher.open()
    try:
        dispatcher.run()
    finally:
        dispatcher.close()
