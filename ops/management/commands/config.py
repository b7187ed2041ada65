"""manage.py config get [KEY] / config set KEY=VALUE ...: the twin of GET/PUT /api/config (the change is
journaled by ops.actions.config_update)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from config.errors import ServiceError
from ops.actions import config_update
from ops.configuration import assignments, effective_config


def _pairs(texts: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for text in texts:
        key, sep, raw = text.partition("=")
        if not sep or not key:
            raise CommandError(f"expected KEY=VALUE, not {text!r}")
        pairs.append((key, raw))
    return pairs


class Command(BaseCommand):
    help = "Show or change the configuration (values are JSON: numbers, lists, null to reset; else text)"

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        get = sub.add_parser("get")
        get.add_argument("key", nargs="?")
        put = sub.add_parser("set")
        put.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
        put.add_argument("--actor", default="cli")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verb"] == "get":
            entries = effective_config()["entries"]
            if options["key"]:
                entries = [e for e in entries if e["key"] == options["key"]]
                if not entries:
                    raise CommandError(f"no such key: {options['key']}")
            for entry in entries:
                pending = (
                    f"; running {json.dumps(entry['running'])} until a restart" if entry["restart_pending"] else ""
                )
                self.stdout.write(f"{entry['key']} = {json.dumps(entry['value'])}  ({entry['source']}{pending})")
            return
        pairs = _pairs(options["pairs"])
        try:
            result = config_update(assignments(pairs), actor=options["actor"])
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        for key, value in result.after.items():
            self.stdout.write(f"{key} = {json.dumps(value)}")
        if result.restart_required:
            self.stdout.write(f"restart needed for: {', '.join(result.restart_required)}")
