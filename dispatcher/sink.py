"""The sink: a process of its own, forked by the dispatcher, that takes results back (PULL) and ingests
them in batches, so decoding, result files and SQL use the second CPU while the ventilator keeps
answering workers. Inside it, the main thread receives and prepares batches (decodes them)
while a writer thread applies the previous batch (one transaction): the writer mostly waits on
PostgreSQL, with the GIL released.

After every drain it sends the ventilator a `SinkReport` through a pipe: how many results arrived (the
ventilator's in-flight count), what the ingestion did, and the per-worker "returned" tallies. The
ventilator owns the counters row and the worker tallies and writes both, so the numbers a reader sees
come from one writer.

A full results disk loses nothing (docs/decisions/full-results-disk.md). Every second the sink reads
the free space of RESULTS_DIR; below RESULTS_MIN_FREE_MB, or once writing an archive failed for want of
space, it holds: it stops reading its socket, so results wait in its small receive queue and behind it in
the workers (ZeroMQ's backpressure: a worker's send waits, it never drops), keeps a batch that could not be
written in memory, keeps the leases of the tasks out running (`leases_hold`), records the hold in Redis for
health and tells the ventilator, which hands out no work meanwhile. It takes results again, the kept
batches first, within a second of there being room.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection

import zmq
from django.conf import settings
from django.db import connections
from django.utils import timezone

from config.live import config_refresh
from config.transient import connections_reset, transient_reason, transient_retry
from conversion.processes import die_with_parent
from corpora.grains import grains_clear
from corpora.results import results_space
from corpora.task_changes import leases_hold
from dispatcher.ingest import (
    IngestOutcome,
    PreparedBatch,
    RawResult,
    results_apply,
    results_prepare,
)
from dispatcher.metrics import ingest_record, results_held_clear, results_held_record

logger = logging.getLogger(__name__)

_INGEST_EVERY_SECONDS = 0.2
# The writer thread wakes on PostgreSQL's answers and must not wait the default 5 ms for the GIL each time.
_SWITCH_INTERVAL_SECONDS = 0.0005
# Results queued in the sink per worker connection: a worker thread has one result out at a time, so this
# never slows one, and a sink that holds results back keeps few of them; the rest wait in the workers.
RECEIVE_HWM = 64
# How often the free space of the results disk is read; while the sink holds results back, how often it
# looks whether it may take them again.
SPACE_CHECK_SECONDS = 1.0
# While the sink holds results back, every running lease is kept at least this long (corpora.task_changes
# .leases_hold), so the results waiting in workers arrive, once it takes them again, before a lease ends.
LEASE_HOLD_SECONDS = 60
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# A batch whose transaction meets a transient database error is applied again: a deadlock or a
# serialization failure a bounded number of times (config.transient.ATTEMPTS), a lost connection for this
# long, so that a PostgreSQL restart does not stop the sink; the backoff between tries grows to at most
# _APPLY_BACKOFF_MAX_SECONDS.
_APPLY_LOST_FOR_SECONDS = 60.0
_APPLY_BACKOFF_MAX_SECONDS = 5.0


class WriterFailed(RuntimeError):
    """The writer thread could not apply a batch (an error that is not transient, or the database gone
    for longer than the retries last): the sink stops, the dispatcher with it, and the results not applied
    come back when their leases run out."""


@dataclass
class Returned:
    """A worker's results returned to the sink since its last report, and when it was first and last seen."""

    count: int
    first_seen: datetime
    last_seen: datetime


@dataclass
class SinkReport:
    """What the sink did since its last report (pickled through the pipe)."""

    received: int = 0
    ingested: int = 0
    discarded: int = 0
    retried: int = 0
    garbage: int = 0
    # (identity, service name) -> its results returned, first and last seen
    returned: dict[tuple[str, str], Returned] = field(default_factory=dict)
    ready: bool = False
    error: str | None = None
    stopped: str | None = None  # in the last report: why the sink stopped
    # When it changed: True once the sink holds results back (the results disk is full), False once it takes
    # them again. The ventilator hands out no work while they are held.
    held: bool | None = None

    def __bool__(self) -> bool:
        return bool(
            self.received
            or self.ingested
            or self.discarded
            or self.retried
            or self.garbage
            or self.ready
            or self.error
            or self.stopped
            or self.held is not None
        )


@dataclass
class Unwritten:
    """A batch the writer could not apply for want of space on the results disk: its transaction rolled back
    and the archives it created were removed; the sink keeps it and applies it again once there is room."""

    batch: PreparedBatch
    error: str

    @property
    def bytes(self) -> int:
        return sum(len(prepared.decoded.archive or b"") for prepared in self.batch.results)


@dataclass
class Sink:
    bind: str
    port: int
    result_batch: int
    reports: Connection
    parent_pid: int
    stopping: bool = False
    stop_reason: str | None = None
    database_away: bool = False

    def __post_init__(self) -> None:
        self.results: list[RawResult] = []
        self.report = SinkReport()
        self.services: dict[str, int] = {}
        self.batches: queue.Queue[PreparedBatch | None] = queue.Queue(maxsize=1)
        self.outcomes: queue.SimpleQueue[IngestOutcome | Unwritten] = queue.SimpleQueue()
        self.held_since: float | None = None  # Unix time since when the sink holds results back
        self.held_reason = ""
        self.unwritten: list[Unwritten] = []  # oldest first
        self.failure: BaseException | None = None
        self.writer = threading.Thread(target=self._write, name="sink-writer", daemon=True)

    def open(self) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PULL)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, RECEIVE_HWM)
        self.socket.bind(f"tcp://{self.bind}:{self.port}")
        self.writer.start()

    def run(self) -> None:
        next_ingest = next_refresh = next_space = time.monotonic()
        self._refresh_services()
        while not self.stopping:
            if time.monotonic() >= next_space:
                self._space_check()
                next_space = time.monotonic() + SPACE_CHECK_SECONDS
            if self.held_since is not None:
                # The socket is not read: what workers send waits in them (and in its short receive queue).
                time.sleep(0.1)
            elif self.socket.poll(100):
                self._drain()
                self._send_report()  # before ingesting, which may wait for the writer
            now = time.monotonic()
            held = self.held_since is not None
            if not held and (len(self.results) >= self.result_batch or (self.results and now >= next_ingest)):
                self._ingest()
                next_ingest = now + _INGEST_EVERY_SECONDS
            if now >= next_refresh:
                self._refresh_services()
                next_refresh = now + 1.0
                if os.getppid() != self.parent_pid:  # the ventilator is gone (it was killed outright)
                    logger.warning("the dispatcher process is gone; the sink stops")
                    self.stopping = True
                    self.stop_reason = "the dispatcher process was gone"
            if self.failure is not None:
                raise WriterFailed(f"the sink could not apply results: {self.failure}") from self.failure
            self._send_report()

    def close(self) -> None:
        """Apply what is held, stop the writer, send the last report. Results held back for want of room
        are dropped: their leases run out and their tasks are converted again."""
        if self.failure is None and self.held_since is None:
            self._ingest()
        self.batches.put(None)
        self.writer.join()
        self._take_outcomes()
        if self.held_since is not None:
            dropped = len(self.results) + sum(len(unwritten.batch.results) for unwritten in self.unwritten)
            logger.warning("the sink stops while it holds results back (%s): %d dropped", self.held_reason, dropped)
            results_held_clear()
        self.report.stopped = self.stop_reason or "it stopped"
        self._send_report()
        self.socket.close(0)
        self.context.term()

    def _space_check(self) -> None:
        """Hold results back while the results disk is below RESULTS_MIN_FREE_MB, or has less room than the
        batches a full disk left unwritten; take them again, those batches first, once it has the room."""
        space = results_space()
        waiting = sum(unwritten.bytes for unwritten in self.unwritten)
        if space.short:
            reason = f"results disk full: {space.describe()}"
        elif self.unwritten and space.free_bytes is not None and space.free_bytes < space.min_free_bytes + waiting:
            reason = self.held_reason
        else:
            self._resume(space.describe())
            return
        since = self._hold(reason)
        held = leases_hold(seconds=LEASE_HOLD_SECONDS)
        if held:
            logger.info("%d lease(s) kept for another %d s while results are held back", held, LEASE_HOLD_SECONDS)
        results_held_record(since=since, reason=reason, free_bytes=space.free_bytes)

    def _hold(self, reason: str) -> float:
        """Hold results back (said once a hold); returns since when they are held (Unix time)."""
        since = self.held_since
        if since is None:
            since = self.held_since = time.time()
            self.report.held = True
            logger.warning("the sink stops taking results: %s", reason)
        self.held_reason = reason
        return since

    def _resume(self, space: str) -> None:
        if self.held_since is None:
            return
        logger.warning("the sink takes results again: %s", space)
        self.held_since = None
        self.report.held = False
        results_held_clear()
        unwritten, self.unwritten = self.unwritten, []
        for kept in unwritten:
            self._submit(kept.batch)

    def _drain(self) -> None:
        """Receive at most one batch of results; the loop then ingests them and reports at once, since the
        ventilator counts results in flight until it hears of them (and stops handing out work at the cap)."""
        now: datetime | None = None
        for _ in range(self.result_batch):
            try:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) < 4:
                self.report.garbage += 1
                continue
            try:
                identity, service, task_id = (frame.decode() for frame in frames[:3])
            except UnicodeDecodeError:
                self.report.garbage += 1
                continue
            data = b"".join(frames[3:])
            self.results.append(
                RawResult(identity=identity, service=service, task_id=task_id, data=data, received_at=time.time())
            )
            self.report.received += 1
            now = now or timezone.now()
            tally = self.report.returned.setdefault((identity[:200], service), Returned(0, now, now))
            tally.count += 1
            tally.last_seen = now

    def _ingest(self) -> None:
        """Prepare the results held (decode them) and hand the batch to the writer thread; waits
        only while the writer is still busy with the batch before the last one."""
        if not self.results:
            return
        results, self.results = self.results, []
        self._submit(results_prepare(results, service_ids=self.services, max_bytes=settings.RESULT_MAX_BYTES))

    def _submit(self, batch: PreparedBatch) -> None:
        while True:
            if self.failure is not None:
                return
            try:
                self.batches.put(batch, timeout=1)
                return
            except queue.Full:
                continue

    def _write(self) -> None:
        """The writer thread: apply batches in order, one transaction each, until told to stop."""
        try:
            while (batch := self.batches.get()) is not None:
                if self.failure is not None:
                    continue
                started = time.monotonic()
                try:
                    outcome = self._apply(batch)
                except OSError as exc:
                    if exc.errno not in _NO_SPACE:
                        logger.exception("the sink could not apply a batch of %d result(s)", len(batch.results))
                        self.failure = exc
                        continue
                    logger.warning("a batch of %d result(s) could not be written: %s", len(batch.results), exc)
                    self.outcomes.put(Unwritten(batch, f"writing a result archive failed: {exc.strerror}"))
                    continue
                except Exception as exc:
                    logger.exception("the sink could not apply a batch of %d result(s)", len(batch.results))
                    self.failure = exc
                    continue
                ingest_record(outcome.ingested, time.monotonic() - started)
                self.outcomes.put(outcome)
        finally:
            connections.close_all()

    def _apply(self, batch: PreparedBatch) -> IngestOutcome:
        """Apply a batch, again after a transient error. Applying twice is harmless: a result whose task
        is no longer leased is discarded, so if a lost connection took the answer to a commit that did
        happen, the second apply discards the batch rather than writing it again."""
        outcome = transient_retry(
            lambda: results_apply(batch, results_dir=settings.RESULTS_DIR),
            what=f"applying a batch of {len(batch.results)} result(s)",
            longest=_APPLY_BACKOFF_MAX_SECONDS,
            lost_for=_APPLY_LOST_FOR_SECONDS,
        )
        if outcome.discarded:
            logger.warning("discarded %d result(s): not leased, unknown service or unreadable", outcome.discarded)
        transient_retry(
            lambda: grains_clear(outcome.pairs),
            what="clearing the report slices of the pairs a batch touched",
            longest=_APPLY_BACKOFF_MAX_SECONDS,
            lost_for=_APPLY_LOST_FOR_SECONDS,
        )
        return outcome

    def _refresh_services(self) -> None:
        """The services' ids by name; while the database is away, the last ones read (said once an outage)."""
        from services.models import Service

        try:
            self.services = dict(Service.objects.values_list("name", "pk"))
            config_refresh()  # DISPATCHER_MAX_ATTEMPTS, which decides whether a governor's stop is tried again
        except Exception as exc:
            if transient_reason(exc) is None:
                raise
            connections_reset()  # this thread's: the writer keeps its own
            if not self.database_away:
                logger.warning(
                    "the database is away (%s); the services read last are kept until it answers", transient_reason(exc)
                )
            self.database_away = True
            return
        self.database_away = False

    def _take_outcomes(self) -> None:
        """Count the writer's outcomes; a batch it could not write for want of space is kept, and the sink
        holds results back from now on."""
        while True:
            try:
                outcome = self.outcomes.get_nowait()
            except queue.Empty:
                return
            if isinstance(outcome, Unwritten):
                self.unwritten.append(outcome)
                self._hold(outcome.error)
                continue
            self.report.ingested += outcome.ingested
            self.report.discarded += outcome.discarded
            self.report.retried += outcome.retried

    def _send_report(self) -> None:
        self._take_outcomes()
        if self.report:
            self.reports.send(self.report)
            self.report = SinkReport()


def sink_main(*, bind: str, port: int, result_batch: int, reports: Connection, parent_pid: int) -> None:
    """The body of the forked sink process: bind, say ready (or why not), serve until SIGTERM."""
    sink = Sink(bind=bind, port=port, result_batch=result_batch, reports=reports, parent_pid=parent_pid)

    def stop(signum: int, frame: object) -> None:
        sink.stopping = True
        sink.stop_reason = f"it was sent {signal.Signals(signum).name}"

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the ventilator stops us
    sys.setswitchinterval(_SWITCH_INTERVAL_SECONDS)
    die_with_parent()  # SIGTERM if the ventilator is killed outright
    try:
        sink.open()
    except zmq.ZMQError as exc:
        reports.send(SinkReport(error=f"the sink cannot bind port {port}: {exc}"))
        return
    reports.send(SinkReport(ready=True))
    try:
        sink.run()
    finally:
        sink.close()
        connections.close_all()
