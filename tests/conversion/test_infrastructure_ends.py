"""How the engine tells a conversion the machine ended from one the document ended: the host's OOM killer
(a SIGKILL while the host's OOM kill count grew, no limit of its own passed) against the conversion's own
memory limit, and the governor's stop; each as the log's last Fatal."""

from __future__ import annotations

import signal

from conversion.choices import KillReason
from conversion.engine import Limits, Run, _host_oom, finish_log
from conversion.logparse import parse_log
from conversion.machine import host_oom_kills

LOG = b"Info:loaded_file:article.cls\nWarning:expected:label Missing label target\n"


def _last_fatal(log: bytes) -> tuple[str, str]:
    fatal = [m for m in parse_log(log).messages if m.severity == "fatal"][-1]
    return fatal.category, fatal.what


def _run(**fields) -> Run:
    return Run(**{"returncode": -signal.SIGKILL, "timed_out": False, "runtime_ms": 900, "stderr": b"", **fields})


def test_a_sigkill_while_the_host_s_oom_killer_acted_is_host_oom_unless_a_limit_of_its_own_was_passed():
    before = host_oom_kills()
    assert before is not None
    # The count grew while it ran (one kill before it started is all this machine may have had).
    assert _host_oom(-signal.SIGKILL, [], False, before - 1)
    # Its own cgroup's memory limit, a timeout, another signal, or no OOM kill meanwhile: not the host's doing.
    assert not _host_oom(-signal.SIGKILL, [KillReason.MEMORY], False, before - 1)
    assert not _host_oom(-signal.SIGKILL, [], True, before - 1)
    assert not _host_oom(-signal.SIGSEGV, [], False, before - 1)
    assert not _host_oom(-signal.SIGKILL, [], False, before)
    assert not _host_oom(-signal.SIGKILL, [], False, None)


def test_the_machine_s_ends_are_infrastructure_fatals_and_the_document_s_own_limits_are_not():
    log, status, killed = finish_log(LOG, _run(host_oom=True), Limits())
    assert (_last_fatal(log), status, killed) == (("infrastructure", "host_oom"), 3, KillReason.HOST_OOM)
    log, _, killed = finish_log(LOG, _run(limit=KillReason.GOVERNOR, governor="told to"), Limits())
    assert (_last_fatal(log), killed) == (("infrastructure", "governor"), KillReason.GOVERNOR)
    log, _, killed = finish_log(LOG, _run(limit=KillReason.MEMORY), Limits(memory_mb=300))
    assert (_last_fatal(log), killed) == (("perl", "out_of_memory"), KillReason.MEMORY)
    log, _, killed = finish_log(LOG, _run(), Limits())  # a SIGKILL with no OOM kill on the host
    assert (_last_fatal(log), killed) == (("perl", "die"), None)
