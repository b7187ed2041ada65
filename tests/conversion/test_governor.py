"""The worker's memory governor: it stops the largest conversion when the machine's available memory
falls below its floor, holds new tasks back until memory recovers, and the engine measures what each
conversion holds. Real LaTeXML in the sandbox, real memory."""

from __future__ import annotations

import threading
import time

import pytest

from conversion.choices import KillReason
from conversion.engine import Watch, convert, latexmlc_path
from conversion.governor import Governor
from conversion.machine import memory_available
from conversion.sandbox import Sandbox
from tests.support import write_tex

BWRAP = Sandbox()
_MB = 1024 * 1024
# LaTeXML Perl that takes memory in 50 MB steps, touching every byte, until it holds 1.2 GB, then waits.
BINDING_HOG = (
    "package LaTeXML::Package::Pool;\nuse strict;\nuse LaTeXML::Package;\n"
    "my @held;\nfor my $i (1 .. 24) { push @held, 'x' x (50 * 1048576); select(undef, undef, undef, 0.1); }\n"
    "sleep 120;\n1;\n"
)


def hog_document(work):
    work.mkdir()
    (work / "hog.sty.ltxml").write_text(BINDING_HOG)
    write_tex(
        work / "doc.tex", "\\documentclass{article}\n\\usepackage{hog}\n\\begin{document}\nHi.\n\\end{document}\n"
    )


def test_the_governor_stops_the_largest_watch_once_and_holds_tasks_back_until_memory_recovers():
    available = [10_000 * _MB]
    governor = Governor(1000, available=lambda: available[0])
    stop = threading.Event()
    with governor.watching() as small, governor.watching() as large:
        small.measured(100 * _MB)
        large.measured(700 * _MB)
        governor.check()
        assert (small.stop_reason, large.stop_reason, governor.paused) == (None, None, False)
        available[0] = 900 * _MB
        governor.check()
        assert small.stop_reason is None and governor.paused
        assert large.stop_reason == (
            "the machine had 900 MB of memory available, below the floor of 1000 MB;"
            " this conversion held 700 MB, the most of the 2 running"
        )
        governor.check()  # still low, but the stopped one has not ended yet: no second stop
        assert small.stop_reason is None and governor.stops == 1
        stop.set()
        assert governor.wait_clear(stop) is False  # held back
    available[0] = 1000 * _MB
    governor.check()
    assert not governor.paused and governor.wait_clear(threading.Event())


def test_a_governor_with_no_floor_never_stops_anything():
    governor = Governor(0, available=lambda: 0)
    with governor.watching() as watch:
        watch.measured(10**9)
        governor.check()
        assert watch.stop_reason is None and not governor.paused


@pytest.mark.slow
def test_the_engine_measures_a_watched_conversion_and_kills_it_when_its_governor_says(tmp_path):
    latexmlc_path()
    hog_document(tmp_path / "work")
    watch = Watch()
    threading.Thread(target=lambda: _stop_when(watch, lambda: watch.rss > 400 * _MB, "told to"), daemon=True).start()
    started = time.monotonic()
    conversion = convert(tmp_path / "work", "doc.tex", timeout=120, sandbox=BWRAP, watch=watch)
    assert time.monotonic() - started < 60  # stopped, not timed out
    assert (conversion.status_code, conversion.killed) == (3, "governor") and KillReason.GOVERNOR == "governor"
    assert (
        b"Fatal:infrastructure:governor the worker's memory governor stopped the conversion: told to\n"
        in conversion.log
    )
    # The resident size of all its processes, measured while it ran: at least what the test saw.
    assert conversion.peak_rss == watch.peak_rss > 400 * _MB


@pytest.mark.slow
def test_a_real_governor_stops_a_conversion_that_takes_the_machine_below_its_floor(tmp_path):
    """The floor is set 400 MB below what the machine has now; the document takes up to 1.2 GB."""
    latexmlc_path()
    hog_document(tmp_path / "work")
    governor = Governor(max(1, (memory_available() - 400 * _MB) // _MB), check_seconds=0.1)
    governor.start()
    try:
        with governor.watching() as watch:
            started = time.monotonic()
            conversion = convert(tmp_path / "work", "doc.tex", timeout=120, sandbox=BWRAP, watch=watch)
        assert time.monotonic() - started < 60
        assert conversion.killed == "governor" and governor.stops == 1
        assert b"below the floor of" in conversion.log
        # Its memory is back once it has ended: the governor lets tasks in again.
        deadline = time.monotonic() + 30
        while governor.paused and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not governor.paused
    finally:
        governor.close()


def _stop_when(watch: Watch, condition, why: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            watch.stop(why)
            return
        time.sleep(0.05)
