"""`manage.py up`: the whole system in one supervised process tree."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.actions import token_create
from accounts.models import ApiToken
from config import ports
from ops import stack
from ops.supervisor import Supervisor

logger = logging.getLogger("ops.up")


class Command(BaseCommand):
    help = (
        "Start the whole system: databases (embedded unless configured), migrations, web, jobs, beat, the"
        " dispatcher and LaTeXML workers; on the first start also a token, the tex_to_html service and a demo corpus."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=ports.WEB_PORT, help=f"web port (default {ports.WEB_PORT})")
        parser.add_argument(
            "--host", default=ports.WEB_HOST,
            help=f"web address to bind (default {ports.WEB_HOST}); with the port it sets PASSKEY_RP_ID and"
            " PASSKEY_ORIGINS unless PASSKEY_ORIGINS is set",
        )  # fmt: skip
        parser.add_argument("--workers", type=int, default=2, help="LaTeXML conversion workers (default 2; 0 for none)")
        parser.add_argument("--no-demo", action="store_true", help="no demo corpus (nor its service) at first start")
        parser.add_argument("--web-processes", type=int, default=2, help="gunicorn worker processes (default 2)")
        parser.add_argument(
            "--web-threads", type=int, default=stack.WEB_THREADS,
            help=f"threads per gunicorn process, more than CONVERT_CONCURRENCY (default {stack.WEB_THREADS})",
        )  # fmt: skip
        parser.add_argument("--job-concurrency", type=int, default=2, help="Celery job worker processes (default 2)")
        parser.add_argument(
            "--access-log", action="store_true", help="print the web server's access log (a line a request) here too"
        )

    def handle(self, *args: object, **options: Any) -> None:
        self.first_token: str | None = None  # made on a first start, shown at the end of start-up
        supervisor = Supervisor()
        supervisor.install_signal_handlers()
        try:
            stack.check_prerequisites(latexml_workers=options["workers"])
            # Before any child starts: one that cannot bind would crash-loop, and the others would talk to
            # whatever holds its port (the workers to another stack's dispatcher).
            stack.ports_check(stack.ports_wanted(web_host=options["host"], web_port=options["port"]), say=self._say)
            stack.check_web_threads(options["web_threads"])
            self._start(supervisor, options)
            supervisor.watch(tick=stack.database_keeper(), servers_down=stack.servers_down)
        except stack.PrerequisiteMissing as exc:
            raise CommandError(str(exc)) from exc
        finally:
            if self.first_token is not None:  # start-up ended before its closing lines: the token is not lost
                self._token_lines()
            supervisor.stop_all()
            self.stdout.write("stopped")
        if supervisor.failure:
            raise CommandError(supervisor.failure)

    def _start(self, supervisor: Supervisor, options: dict[str, Any]) -> None:
        stack.check_database()
        redis = stack.redis_child()
        if redis is not None:
            supervisor.start(redis)
        stack.wait_for_redis()
        if supervisor.stopping:
            return
        call_command("migrate", interactive=False, verbosity=0)
        if not ApiToken.objects.exists():
            _, self.first_token = token_create(actor=stack.FIRST_ACTOR, created_by="up", staff=True)
            self.stdout.write(f"First start: an admin token for actor '{stack.FIRST_ACTOR}' is shown at the end.")
        if stack.first_start_load(actor=stack.FIRST_ACTOR, demo=not options["no_demo"]):
            self.stdout.write(
                f"First start: loaded the demo corpus '{stack.DEMO_CORPUS}' with {stack.DEMO_SERVICE} (30 s a"
                f" document); {stack.SERVICE}, with the worker's own limits, is for your papers."
            )
        if (notice := stack.first_start_notice()) is not None:
            self.stdout.write(notice)
        dispatcher = supervisor.start(stack.dispatcher_child())
        # The workers connect only once this stack's dispatcher holds its ports.
        stack.wait_for_listening(
            supervisor, dispatcher, [settings.DISPATCHER_VENTILATOR_PORT, settings.DISPATCHER_SINK_PORT]
        )
        if supervisor.stopping:
            return
        if settings.CONVERT_WARM:
            why = stack.convert_engine_problem()
            if why is None:
                supervisor.start(stack.convert_engine_child())
            else:
                self.stdout.write(f"The warm engine of /convert is not started: {why}.")
        if options["workers"] > 0:
            supervisor.start(stack.latexml_workers_child(concurrency=options["workers"]))
        supervisor.start(stack.celery_worker_child(concurrency=options["job_concurrency"]))
        supervisor.start(stack.celery_beat_child())
        supervisor.start(
            stack.web_child(
                host=options["host"],
                port=options["port"],
                processes=options["web_processes"],
                threads=options["web_threads"],
                access_log=options["access_log"],
            )
        )
        base_url = f"http://{options['host']}:{options['port']}"
        if not stack.wait_for_web(base_url):
            raise stack.PrerequisiteMissing(f"the web server did not answer on {base_url} (is the port taken?)")
        starting = stack.wait_for_started(supervisor)
        if supervisor.stopping:
            return
        self._ready(base_url, stack.screens_url(host=options["host"], port=options["port"]), starting)

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _token_lines(self) -> None:
        self.stdout.write(f"First start: an admin token for actor '{stack.FIRST_ACTOR}' (shown once):")
        self.stdout.write(f"TOKEN={self.first_token}")
        self.first_token = None

    def _ready(self, base_url: str, screens: str, starting: list[str]) -> None:
        """The closing lines of start-up, after every child's own: where to go and, on a first start, the token."""
        self.stdout.write("")
        if starting:
            self.stdout.write(f"Still starting: {', '.join(starting)} (their lines follow when they are up).")
        if self.first_token is not None:
            self._token_lines()
        self.stdout.write(f"BASE_URL={base_url}")
        self.stdout.write(f"Ready: {screens}/  (screens {screens}/jobs, API {screens}/api). Ctrl-C stops everything.")
        self.stdout.write(
            f"Sign in at {screens}/login with a token (`manage.py create_token NAME` makes more); or from a shell:"
            f" ccs login --url {screens}"
        )
        self.stdout.flush()
