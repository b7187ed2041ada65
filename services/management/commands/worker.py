"""manage.py worker: the bundled worker, with its endpoints and limits taken from the settings (each declared, with
its default, in config/keys.py; stored run-time values applied as the apps became ready)."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversion.engine import EngineMissing, latexmlc_path, sandbox_check
from conversion.machine import concurrency_auto
from conversion.worker import concurrency_arg, run_worker, stop_on_signals
from services.queries import conversion_sandbox, converter_names

# How often `--all-services` reads the services again: a service registered since is served from then on.
SERVICES_REFRESH_SECONDS = 5.0

logger = logging.getLogger(__name__)


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
        parser.add_argument(
            "--all-services", action="store_true",
            help="serve every service that converts, as registered now and later (read again every"
            f" {SERVICES_REFRESH_SECONDS:g} s), instead of --service",
        )  # fmt: skip

    def handle(
        self, *args: object, service: list[str] | None, concurrency: int | str, identity: str | None,
        all_services: bool, **options: object,
    ) -> None:  # fmt: skip
        if all_services and service:
            raise CommandError("give --service or --all-services, not both")
        services = converter_names() if all_services else service or ["tex_to_html"]
        memory_mb = settings.CONVERSION_MEMORY_MB
        if not isinstance(concurrency, int):  # concurrency_arg gives a number or "auto"
            concurrency = concurrency_auto(memory_mb)
        sandbox = conversion_sandbox()
        try:
            latexmlc_path()
            # Before saying it serves: a worker whose sandbox cannot start only says why, in one line.
            sandbox_check(sandbox)
        except EngineMissing as exc:
            raise CommandError(str(exc)) from exc
        host = settings.DISPATCHER_HOST
        ventilator = f"tcp://{host}:{settings.DISPATCHER_VENTILATOR_PORT}"
        sink = f"tcp://{host}:{settings.DISPATCHER_SINK_PORT}"
        stop = threading.Event()
        # Without this a SIGTERM would end the process and leave running latexmlc groups behind.
        stop_on_signals(stop)
        if all_services:
            threading.Thread(target=_follow_services, args=(services, stop), daemon=True).start()
        self.stdout.write(
            f"worker serving {'every service (now ' if all_services else ''}{', '.join(services)}"
            f"{')' if all_services else ''} from {ventilator}, results to {sink}, concurrency {concurrency},"
            f" sandbox {sandbox.mode}"
        )
        try:
            run_worker(
                ventilator=ventilator,
                sink=sink,
                service=services,
                concurrency=concurrency,
                identity=identity,
                timeout=settings.CONVERSION_TIMEOUT_SECONDS,
                memory_mb=memory_mb,
                message_size=settings.DISPATCHER_MESSAGE_SIZE,
                stop=stop,
                result_max_bytes=settings.RESULT_MAX_BYTES,
                disk_mb=settings.CONVERSION_DISK_MB,
                max_processes=settings.CONVERSION_MAX_PROCESSES,
                memory_floor_mb=settings.CONVERSION_MEMORY_FLOOR_MB,
                sandbox=sandbox,
                profile_roots=[str(root) for root in settings.PROFILE_ROOTS],
                serve_changing=all_services,
            )
        except EngineMissing as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write("worker stopped")


def _follow_services(services: list[str], stop: threading.Event) -> None:
    """Keep `services` (shared with the worker's threads) equal to the services that convert, until `stop`."""
    from django.db import close_old_connections

    while not stop.wait(SERVICES_REFRESH_SECONDS):
        try:
            names = converter_names()
        except Exception:  # the database is away for now: keep serving what was known, ask again later
            logger.warning("cannot read the services; serving %s meanwhile", ", ".join(services), exc_info=True)
            close_old_connections()
            continue
        if names != services:
            logger.info("serving %s", ", ".join(names) or "nothing")
            services[:] = names
