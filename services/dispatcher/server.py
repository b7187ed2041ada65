"""The dispatcher process: a ROUTER (ventilator) hands out tasks, a PULL (sink) takes results back.

One thread, one poll loop. Leases are claimed in batches when workers ask, results are ingested in
batches, expired leases are reaped on a timer, worker tallies and counters are flushed once a second.
Anything a peer sends that does not fit the protocol is counted and ignored: the loop never dies of it.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field

import zmq
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from conversion.archive import pack_entry
from conversion.wire import split_frames
from reports.actions import grains_clear
from services.dispatcher.ingest import RawResult, result_ingest, runs_close_drained
from services.dispatcher.leases import LeasedTask, lease_batch, lease_release, leases_reap
from services.models import DispatcherState, Service
from services.queries import effective_lease_seconds

logger = logging.getLogger(__name__)

NO_WORK = [b"0", b""]
_MAX_SERVICE_NAME = 200


@dataclass
class Counters:
    leased: int = 0
    dispatched: int = 0
    ingested: int = 0
    discarded: int = 0
    garbage: int = 0
    reaped: int = 0
    failed_for_retries: int = 0


@dataclass
class Tally:
    dispatched: int = 0
    returned: int = 0
    first_seen: object = None
    last_seen: object = None


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

    @classmethod
    def from_settings(cls) -> DispatcherConfig:
        return cls(
            bind=settings.DISPATCHER_BIND,
            ventilator_port=settings.DISPATCHER_VENTILATOR_PORT,
            sink_port=settings.DISPATCHER_SINK_PORT,
            message_size=settings.DISPATCHER_MESSAGE_SIZE,
            max_in_flight=settings.DISPATCHER_MAX_IN_FLIGHT,
            max_attempts=settings.DISPATCHER_MAX_ATTEMPTS,
            lease_batch=settings.DISPATCHER_LEASE_BATCH,
            result_batch=settings.DISPATCHER_RESULT_BATCH,
            reap_seconds=settings.DISPATCHER_REAP_SECONDS,
        )


@dataclass
class Dispatcher:
    config: DispatcherConfig
    counters: Counters = field(default_factory=Counters)
    # A positive lease mark of this run: leased tasks carry it as their status.
    mark: int = field(default_factory=lambda: random.randint(1, 2**31 - 1))  # noqa: S311
    stopping: bool = False

    def __post_init__(self) -> None:
        self.queues: dict[str, deque[LeasedTask]] = defaultdict(deque)
        self.results: list[RawResult] = []
        self.tallies: dict[tuple[str, int], Tally] = defaultdict(Tally)
        self.services: dict[str, tuple[int, int]] = {}  # name -> (id, lease seconds), refreshed each second
        self.in_flight = 0  # handed out and not yet returned (or reaped)
        self.context = zmq.Context.instance()

    # --- sockets and the loop ------------------------------------------------------------------

    def open(self) -> None:
        self.ventilator = self.context.socket(zmq.ROUTER)
        self.sink = self.context.socket(zmq.PULL)
        for sock in (self.ventilator, self.sink):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVHWM, 100_000)
        self.ventilator.setsockopt(zmq.ROUTER_MANDATORY, 0)
        self.ventilator.bind(f"tcp://{self.config.bind}:{self.config.ventilator_port}")
        self.sink.bind(f"tcp://{self.config.bind}:{self.config.sink_port}")
        self.state = DispatcherState.objects.create(
            started_at=timezone.now(), heartbeat_at=timezone.now(), pid=os.getpid()
        )
        DispatcherState.objects.exclude(pk=self.state.pk).delete()
        logger.info(
            "dispatcher listening: ventilator %s:%s, sink %s:%s",
            self.config.bind, self.config.ventilator_port, self.config.bind, self.config.sink_port,
        )  # fmt: skip

    def close(self) -> None:
        """Flush what is pending and give back leased tasks that never left."""
        self._ingest()
        unsent = [task.id for queue in self.queues.values() for task in queue]
        released = lease_release(unsent, mark=self.mark)
        self.queues.clear()
        self._flush()
        self.ventilator.close(0)
        self.sink.close(0)
        logger.info("dispatcher stopped; %d unsent leases given back", released)

    def run(self, *, until: float | None = None) -> None:
        poller = zmq.Poller()
        poller.register(self.ventilator, zmq.POLLIN)
        poller.register(self.sink, zmq.POLLIN)
        next_flush = next_reap = next_ingest = time.monotonic()
        self._refresh_services()
        while not self.stopping and (until is None or time.monotonic() < until):
            events = dict(poller.poll(100))
            if self.sink in events:
                self._drain_sink()
            if self.ventilator in events:
                self._drain_ventilator()
            now = time.monotonic()
            if len(self.results) >= self.config.result_batch or (self.results and now >= next_ingest):
                self._ingest()
                next_ingest = now + 0.2
            if now >= next_reap:
                self._reap()
                next_reap = now + self.config.reap_seconds
            if now >= next_flush:
                self._flush()
                self._refresh_services()
                self._prune_queues()
                next_flush = now + 1.0

    # --- ventilator: hand out work ---------------------------------------------------------------

    def _drain_ventilator(self) -> None:
        for _ in range(1000):
            try:
                frames = self.ventilator.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._answer(frames)

    def _answer(self, frames: list[bytes]) -> None:
        identity = frames[0]
        request = frames[1:]
        if len(request) != 1 or not request[0] or len(request[0]) > _MAX_SERVICE_NAME:
            self.counters.garbage += 1
            self._send(identity, NO_WORK)
            return
        try:
            service_name = request[0].decode()
        except UnicodeDecodeError:
            self.counters.garbage += 1
            self._send(identity, NO_WORK)
            return
        task = self._next_task(service_name)
        if task is None:
            self._send(identity, NO_WORK)
            return
        try:
            payload = pack_entry(task.path, task.kind, task.entry)
        except (OSError, ValueError) as exc:
            # The document cannot be read now: the lease runs out, the reaper retries it and, once the
            # attempts are used up, makes it fatal with a message saying so.
            logger.warning("cannot pack task %s (%s): %s", task.id, task.path, exc)
            self._send(identity, NO_WORK)
            return
        self._send(identity, [str(task.id).encode(), *split_frames(payload, self.config.message_size)])
        self.in_flight += 1
        self.counters.dispatched += 1
        tally = self._tally(identity, task.service_id)
        tally.dispatched += 1

    def _send(self, identity: bytes, frames: list[bytes]) -> None:
        try:
            self.ventilator.send_multipart([identity, *frames], zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # the peer went away or its queue is full: drop the reply
            logger.debug("could not answer %r: %s", identity, exc)

    def _next_task(self, service_name: str) -> LeasedTask | None:
        if self.in_flight >= self.config.max_in_flight:
            return None
        service = self.services.get(service_name)
        if service is None:
            return None
        queue = self.queues[service_name]
        if not queue:
            room = self.config.max_in_flight - self.in_flight
            limit = min(self.config.lease_batch, room)
            batch = lease_batch(service_id=service[0], limit=limit, mark=self.mark, lease_seconds=service[1])
            self.counters.leased += len(batch)
            queue.extend(batch)
        return queue.popleft() if queue else None

    # --- sink: take results back -----------------------------------------------------------------

    def _drain_sink(self) -> None:
        for _ in range(5000):
            try:
                frames = self.sink.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) < 4:
                self.counters.garbage += 1
                continue
            try:
                identity, service, task_id = (frame.decode() for frame in frames[:3])
            except UnicodeDecodeError:
                self.counters.garbage += 1
                continue
            data = b"".join(frames[3:])
            self.results.append(RawResult(identity=identity, service=service, task_id=task_id, data=data))
            self.in_flight = max(self.in_flight - 1, 0)
            service_entry = self.services.get(service)
            if service_entry is not None:
                self._tally(identity.encode(), service_entry[0]).returned += 1
            if len(self.results) >= self.config.result_batch:
                self._ingest()

    def _ingest(self) -> None:
        if not self.results:
            return
        batch, self.results = self.results, []
        outcome = result_ingest(
            batch,
            service_ids={name: entry[0] for name, entry in self.services.items()},
            results_dir=settings.RESULTS_DIR,
            max_bytes=settings.RESULT_MAX_BYTES,
        )
        self.counters.ingested += outcome.ingested
        self.counters.discarded += outcome.discarded
        if outcome.discarded:
            logger.warning("discarded %d result(s): not leased, unknown service or unreadable", outcome.discarded)
        grains_clear(outcome.pairs)
        runs_close_drained(outcome.pairs)

    # --- timers ----------------------------------------------------------------------------------

    def _reap(self) -> None:
        returned, fatal = leases_reap(max_attempts=self.config.max_attempts)
        self.counters.reaped += returned + fatal
        self.counters.failed_for_retries += fatal
        # Reaped tasks are no longer in flight anywhere; recount from the database to stay honest.
        if returned or fatal:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM corpora_task WHERE status = %s", [self.mark])
                queued = sum(len(q) for q in self.queues.values())
                self.in_flight = max(cursor.fetchone()[0] - queued, 0)

    def _prune_queues(self) -> None:
        """Drop queued tasks that are no longer leased by us (paused, deleted) so they are not sent."""
        queued = [task.id for queue in self.queues.values() for task in queue]
        if not queued:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT id FROM corpora_task WHERE id = ANY(%s) AND status = %s", [queued, self.mark])
            still = {row[0] for row in cursor.fetchall()}
        for name, queue in self.queues.items():
            self.queues[name] = deque(task for task in queue if task.id in still)

    def _refresh_services(self) -> None:
        self.services = {s.name: (s.pk, effective_lease_seconds(s)) for s in Service.objects.all()}

    def _tally(self, identity: bytes, service_id: int) -> Tally:
        key = (identity.decode(errors="replace")[:200], service_id)
        tally = self.tallies[key]
        now = timezone.now()
        tally.first_seen = tally.first_seen or now
        tally.last_seen = now
        return tally

    def _flush(self) -> None:
        """Write worker tallies (one upsert) and the counters/heartbeat row."""
        tallies, self.tallies = self.tallies, defaultdict(Tally)
        with connection.cursor() as cursor:
            if tallies:
                keys = list(tallies)
                cursor.execute(
                    """
                    INSERT INTO services_worker (identity, service_id, dispatched, returned, first_seen, last_seen)
                    SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bigint[],
                                         %s::timestamptz[], %s::timestamptz[])
                    ON CONFLICT (identity, service_id) DO UPDATE
                       SET dispatched = services_worker.dispatched + EXCLUDED.dispatched,
                           returned = services_worker.returned + EXCLUDED.returned,
                           last_seen = EXCLUDED.last_seen
                    """,
                    [
                        [k[0] for k in keys], [k[1] for k in keys],
                        [tallies[k].dispatched for k in keys], [tallies[k].returned for k in keys],
                        [tallies[k].first_seen for k in keys], [tallies[k].last_seen for k in keys],
                    ],
                )  # fmt: skip
        c = self.counters
        DispatcherState.objects.filter(pk=self.state.pk).update(
            heartbeat_at=timezone.now(), leased=c.leased, dispatched=c.dispatched, ingested=c.ingested,
            discarded=c.discarded, garbage=c.garbage, reaped=c.reaped, failed_for_retries=c.failed_for_retries,
        )  # fmt: skip


def dispatcher_serve(config: DispatcherConfig | None = None) -> None:
    """Run the dispatcher until SIGTERM or SIGINT."""
    dispatcher = Dispatcher(config or DispatcherConfig.from_settings())

    def stop(signum: int, frame: object) -> None:
        dispatcher.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    close_old_connections()
    dispatcher.open()
    try:
        dispatcher.run()
    finally:
        dispatcher.close()
