#!/usr/bin/env python
"""Django's command-line entry point for the corpus conversion service."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    from config.env import ConfigError
    from config.ports import PortTaken, up_preflight

    try:
        if sys.argv[1:2] == ["up"]:
            # Before the settings load: they start the embedded PostgreSQL (and create its data on a first start).
            up_preflight(sys.argv[2:])
        execute_from_command_line(sys.argv)
    except ConfigError as exc:  # a bad setting is one clear line, not a traceback
        sys.exit(f"configuration error: {exc}")
    except PortTaken as exc:
        sys.exit(f"CommandError: {exc}")


if __name__ == "__main__":
    main()
