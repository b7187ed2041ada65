"""The sink: a process of its own, forked by the dispatcher, that takes results back (PULL) and ingests
them in batches, so decoding, result files and SQL use the second CPU while the ventilator keeps
answering workers. Inside it, the main thread receives and prepares batches (decodes them)
while a writer thread applies the previous batch (one transaction): the writer mostly waits on
PostgreSQL, with the GIL released.

After every drain it sends the ventilator a `SinkReport` through a pipe: how many results arrived (the
ventilator's in-flight count), what the ingestion did, and the per-worker "returned" tallies. The
ventilator owns the counters row and the worker tallies and writes both, so the numbers a reader sees
come from one writer.
"""

from __future__ import annotations

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

from config.live import config_sync
from config.transient import connections_reset, transient_reason
from conversion.processes import die_with_parent
from corpora.lifecycle import grains_clear
from dispatcher.ingest import (
    IngestOutcome,
    PreparedBatch,
    RawResult,
    results_apply,
    results_prepare,
)
from dispatcher.metrics import ingest_record

logger = logging.getLogger(__name__)

_INGEST_EVERY_SECONDS = 0.2
# The writer thread wakes on PostgreSQL's answers and must not wait the default 5 ms for the GIL each time.
_SWITCH_INTERVAL_SECONDS = 0.0005


class WriterFailed(RuntimeError):
    """The writer thread could not apply a batch (the database went away): the sink stops, the dispatcher
    with it, and the results not applied come back when their leases run out."""


@dataclass
class SinkReport:
    """What the sink did since its last report (pickled through the pipe)."""

    received: int = 0
    ingested: int = 0
    discarded: int = 0
    retried: int = 0
    garbage: int = 0
    # (identity, service name) -> (results returned, first seen, last seen)
    returned: dict[tuple[str, str], list] = field(default_factory=dict)
    ready: bool = False
    error: str | None = None
    stopped: str | None = None  # in the last report: why the sink stopped

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
        )


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
        self.outcomes: queue.SimpleQueue[IngestOutcome] = queue.SimpleQueue()
        self.failure: BaseException | None = None
        self.writer = threading.Thread(target=self._write, name="sink-writer", daemon=True)

    def open(self) -> None:
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PULL)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, 100_000)
        self.socket.bind(f"tcp://{self.bind}:{self.port}")
        self.writer.start()

    def run(self) -> None:
        next_ingest = next_refresh = time.monotonic()
        self._refresh_services()
        while not self.stopping:
            if self.socket.poll(100):
                self._drain()
                self._send_report()  # before ingesting, which may wait for the writer
            now = time.monotonic()
            if len(self.results) >= self.result_batch or (self.results and now >= next_ingest):
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
        """Apply what is held, stop the writer, send the last report."""
        if self.failure is None:
            self._ingest()
        self.batches.put(None)
        self.writer.join()
        self.report.stopped = self.stop_reason or "it stopped"
        self._send_report()
        self.socket.close(0)
        self.context.term()

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
            tally = self.report.returned.setdefault((identity[:200], service), [0, now, now])
            tally[0] += 1
            tally[2] = now

    def _ingest(self) -> None:
        """Prepare the results held (decode them) and hand the batch to the writer thread; waits
        only while the writer is still busy with the batch before the last one."""
        if not self.results:
            return
        results, self.results = self.results, []
        batch = results_prepare(results, service_ids=self.services, max_bytes=settings.RESULT_MAX_BYTES)
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
                    outcome = results_apply(batch, results_dir=settings.RESULTS_DIR)
                    if outcome.discarded:
                        logger.warning(
                            "discarded %d result(s): not leased, unknown service or unreadable", outcome.discarded
                        )
                    grains_clear(outcome.pairs)
                except Exception as exc:
                    logger.exception("the sink could not apply a batch of %d result(s)", len(batch.results))
                    self.failure = exc
                    continue
                ingest_record(outcome.ingested, time.monotonic() - started)
                self.outcomes.put(outcome)
        finally:
            connections.close_all()

    def _refresh_services(self) -> None:
        """The services' ids by name; while the database is away, the last ones read (said once an outage)."""
        from services.models import Service

        try:
            self.services = dict(Service.objects.values_list("name", "pk"))
            config_sync()  # DISPATCHER_MAX_ATTEMPTS, which decides whether a governor's stop is tried again
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

    def _send_report(self) -> None:
        while True:
            try:
                outcome = self.outcomes.get_nowait()
            except queue.Empty:
                break
            self.report.ingested += outcome.ingested
            self.report.discarded += outcome.discarded
            self.report.retried += outcome.retried
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
