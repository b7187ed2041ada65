"""A child process that follows its parent out: PR_SET_PDEATHSIG, the one place it is set. Standard library
only, so the worker, the engine, the dispatcher's sink and `up`'s supervisor share it."""

from __future__ import annotations

import contextlib
import ctypes
import signal

# prctl is looked up once, before any fork: the call itself is then safe between fork and exec.
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: no prctl, the callers' own stops remain
    _prctl = None
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child (between fork and exec, or in a forked process): get `sig` when the parent thread that
    started it ends, its process killed outright included. Off Linux it does nothing."""
    if _prctl is not None:
        with contextlib.suppress(OSError):
            _prctl(_PR_SET_PDEATHSIG, sig)
