"""The vocabularies of ccs, each spelled here once: the shells it writes completion scripts for (Typer shows
and checks a StrEnum's values; lower-case member names, as Typer lists them)."""

from __future__ import annotations

import enum


class Shell(enum.StrEnum):
    bash = "bash"
    zsh = "zsh"
