"""A child process that follows its parent out: PR_SET_PDEATHSIG, the one place it is set; and the scratch
directories of conversions, named after their process so that those of a killed one are found and removed.
Standard library only, so the worker, the engine, the dispatcher's sink and `up`'s supervisor share it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import tempfile
from collections.abc import Callable

# prctl is looked up once, before any fork: the call itself is then safe between fork and exec.
_prctl: Callable[..., int] | None
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


# --- scratch directories -------------------------------------------------------------------------
# A conversion's scratch directories (a worker's task, a /convert request, a warm server, a sandbox staging
# copy) are named <kind><pid>-<random>, after the process that made them: a process killed outright cannot
# remove its own, and the next one that starts removes those whose process is gone.
SCRATCH_KINDS = ("cortex-task-", "cortex-text-", "cortex-warm-", "cortex-sandbox-", ".cortex-tmp-")
_swept: set[str] = set()


def scratch_prefix(kind: str) -> str:
    """The name prefix of this process's scratch directories of `kind` (one of SCRATCH_KINDS)."""
    return f"{kind}{os.getpid()}-"


def scratch_sweep(directories: list[str] | None = None) -> int:
    """Remove the scratch directories that processes now gone left in `directories` (the temp directory and
    /tmp by default), once per directory and process; only this user's. Returns how many were removed."""
    removed = 0
    for directory in directories or [tempfile.gettempdir(), "/tmp"]:  # noqa: S108 - the staging fallback
        if directory in _swept:
            continue
        _swept.add(directory)
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            kind = next((kind for kind in SCRATCH_KINDS if entry.name.startswith(kind)), None)
            if kind is None:
                continue
            pid = entry.name[len(kind) :].split("-", 1)[0]
            try:
                mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid()
            except OSError:
                continue
            if mine and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    return removed
