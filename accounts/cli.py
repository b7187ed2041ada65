"""The actor name recorded for writes made from the command line."""

from __future__ import annotations

import getpass


def cli_actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"
