#!/usr/bin/env python
"""Django's command-line entry point for the corpus conversion service."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    from config.env import ConfigError

    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:  # a bad setting is one clear line, not a traceback
        sys.exit(f"configuration error: {exc}")


if __name__ == "__main__":
    main()
