"""manage.py worker: the bundled worker, with its endpoints and limits taken from the settings."""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversion.engine import EngineMissing, latexmlc_path, sandbox_check
from conversion.machine import concurrency_auto
from conversion.worker import concurrency_arg, run_worker, stop_on_signals
from services.queries import conversion_sandbox


class Command(BaseCommand):
    help = "Run a worker that converts tasks of a service with latexmlc, until SIGTERM or Ctrl-C."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--service", action="append", default=None,
            help="the service to serve (default tex_to_html); repeat it to serve several, asked for in turn",
        )  # fmt: skip
        parser.add_argument(
            "--concurrency", type=concurrency_arg, default=1,
            help="conversions run at once (default 1), or auto: one per core, as many as the available memory"
            " holds at CONVERSION_MEMORY_MB each",
        )  # fmt: skip
        parser.add_argument("--identity", default=None, help="the worker's name (default hostname:pid)")

    def handle(
        self, *args: object, service: list[str] | None, concurrency: int | str, identity: str | None, **options: object
    ) -> None:
        services = service or ["tex_to_html"]
        memory_mb = getattr(settings, "CONVERSION_MEMORY_MB", 4096)
        if concurrency == "auto":
            concurrency = concurrency_auto(memory_mb)
        sandbox = conversion_sandbox()
        try:
            latexmlc_path()
            # Before saying it serves: a worker whose sandbox cannot start only says why, in one line.
            sandbox_check(sandbox)
        except EngineMissing as exc:
            raise CommandError(str(exc)) from exc
        host = getattr(settings, "DISPATCHER_HOST", "127.0.0.1")
        ventilator = f"tcp://{host}:{getattr(settings, 'DISPATCHER_VENTILATOR_PORT', 51695)}"
        sink = f"tcp://{host}:{getattr(settings, 'DISPATCHER_SINK_PORT', 51696)}"
        stop = threading.Event()
        # Without this a SIGTERM would end the process and leave running latexmlc groups behind.
        stop_on_signals(stop)
        self.stdout.write(
            f"worker serving {', '.join(services)} from {ventilator}, results to {sink}, concurrency {concurrency},"
            f" sandbox {sandbox.mode}"
        )
        try:
            run_worker(
                ventilator=ventilator,
                sink=sink,
                service=services,
                concurrency=concurrency,
                identity=identity,
                timeout=getattr(settings, "CONVERSION_TIMEOUT_SECONDS", 300),
                memory_mb=memory_mb,
                message_size=getattr(settings, "DISPATCHER_MESSAGE_SIZE", 100_000),
                stop=stop,
                result_max_bytes=settings.RESULT_MAX_BYTES,
                disk_mb=settings.CONVERSION_DISK_MB,
                max_processes=settings.CONVERSION_MAX_PROCESSES,
                memory_floor_mb=settings.CONVERSION_MEMORY_FLOOR_MB,
                sandbox=sandbox,
                profile_roots=[str(root) for root in settings.PROFILE_ROOTS],
            )
        except EngineMissing as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write("worker stopped")
