"""manage.py convert_engine: the warm engine of POST /convert (conversion/warm.py), its pools as the settings
say, answering on a Unix socket under VAR_DIR until SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from conversion import warm
from conversion.engine import EngineMissing, Limits, latexmlc_path, sandbox_check
from services.queries import conversion_sandbox, convert_engine_socket

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run the warm engine of /convert: LaTeXML prepared once per server, one fork per conversion."

    def handle(self, *args: object, **options: Any) -> None:
        try:
            pools = warm.parse_pools(settings.CONVERT_WARM_POOLS)
        except ValueError as exc:
            raise CommandError(f"CONVERT_WARM_POOLS: {exc}") from None
        sandbox = conversion_sandbox()
        try:
            latexmlc_path()
            sandbox_check(sandbox)
        except EngineMissing as exc:
            raise CommandError(str(exc)) from None
        limits = Limits(settings.CONVERT_TIMEOUT_SECONDS, settings.CONVERSION_MEMORY_MB, settings.CONVERSION_DISK_MB,
                        settings.CONVERSION_MAX_PROCESSES)  # fmt: skip
        engine = warm.WarmEngine(pools, limits=limits, sandbox=sandbox, on_demand_size=settings.CONVERT_WARM_ON_DEMAND,
                                 max_pools=settings.CONVERT_WARM_MAX_POOLS)  # fmt: skip
        path = convert_engine_socket()
        with warm.serving(engine, path) as server:
            stop = threading.Event()

            def stopping(signum: int, _frame: object) -> None:
                stop.set()
                threading.Thread(target=server.shutdown, daemon=True).start()

            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, stopping)
            engine.start()
            names = ", ".join(f"{profile.name}={size}" for profile, size in pools.items())
            self.stdout.write(f"convert engine on {path}: pools {names or 'none'}")
            self.stdout.flush()
            try:
                server.serve_forever(poll_interval=0.5)
            finally:
                engine.stop()
