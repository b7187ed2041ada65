"""The warm engine (conversion/warm.py, warm_server.pl) with real LaTeXML in the real bubblewrap sandbox: a
conversion starts from the state its server prepared and leaves nothing for the next one; a hostile input
ends at the limit it passed with the fatal line the cold engine writes for it; the server serves the next
request afterwards; a parent that dies is started again, and a request it was serving is refused so that
/convert falls back to a cold latexmlc.

What reaches the limits from /convert's text input: an endless loop (the timeout), a runaway macro
(Perl's deep recursion, memory), a helper process past the process limit (html4's math images run latex).
A fork bomb, a disk filler, a process left behind and a read of the parent's memory need Perl code, which
text input cannot give LaTeXML: a binding (`x.sty.ltxml`) is loaded from the working directory only, and
TeX's `\\openout` writes into LaTeXML's memory, not to disk. Those cases place a binding in the server's
working directory before the conversion (where a worker's document carries its own, tests/fixtures/hostile):
they prove the server's watch, not a way in.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from conversion.engine import Limits, convert_text, latexmlc_path
from conversion.processes import scratch_prefix, scratch_sweep
from conversion.sandbox import INSIDE_TMP, INSIDE_WORK
from conversion.warm import (
    ANSWER_SECONDS,
    Profile,
    WarmEngine,
    WarmPool,
    WarmServer,
    WarmUnavailable,
    request,
    serving,
)
from tests.support import PROJECT_DIR, wait_until

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
HOSTILE = FIXTURES / "hostile"
WARM = FIXTURES / "warm"
# Small limits, so that every hostile case meets its limit within seconds. The timeout is the exception: the
# other limits must be met well before it, on a busy machine too (the memory bomb takes 10 s on a quiet one).
TIMEOUT = 60
LIMITS = Limits(timeout=TIMEOUT, memory_mb=1024, disk_mb=64, max_processes=16)
# The timeout of the cases that end at it: short, as only the fatal line and the time it came at matter.
SHORT_TIMEOUT = 3
# How long past its timeout a conversion may take to end: the kill, the parent's word and the log.
END_SECONDS = ANSWER_SECONDS
FORMULA = Profile(whatsin="math", whatsout="math", pmml=True)
# How long a server or a pool may take to start again on a busy machine (about a second on a quiet one).
RESTART_SECONDS = 60


def document(body: str, preamble: str = "") -> str:
    return f"\\documentclass{{article}}{preamble}\\begin{{document}}{body}\\end{{document}}"


def unspaced(text: str) -> str:
    return "".join(text.split())


def fatal_lines(answer: dict) -> list[str]:
    return [line for line in answer["log"].splitlines() if line.startswith("Fatal:")]


def assert_serves(server: WarmServer) -> None:
    """The server converts a formula in a document correctly."""
    answer = server.convert(document("$x^{2}$"), timeout=TIMEOUT)
    assert (answer["status"], answer["status_code"]) == ("no_problem", 0), answer["log"][-1500:]
    assert "<msup><mi>x</mi><mn>2</mn></msup>" in answer["result"]


def parent_of(server: WarmServer) -> int:
    """The host pid of the server's Perl parent: the one child of the sandbox's first process."""
    (child,) = Path(f"/proc/{server.first}/task/{server.first}/children").read_text().split()
    return int(child)


def namespace_processes(server: WarmServer) -> set[int]:
    """Every live process of the machine in the server's pid namespace (which no process can leave)."""
    namespace = os.readlink(f"/proc/{server.first}/ns/pid")
    found = set()
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                with open(f"/proc/{entry}/stat") as stat:
                    if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                        found.add(int(entry))
    return found


def assert_nothing_left(server: WarmServer) -> None:
    """Between conversions the server holds its sandbox's first process and its parent, nothing else, and
    its working directory and /tmp are empty."""
    assert server.alive(), server.broken
    assert namespace_processes(server) == {server.first, parent_of(server)}
    assert sorted(server._session.work.iterdir()) == [] and sorted(server._session.tmp.iterdir()) == []


def place(server: WarmServer, binding: Path) -> None:
    """Put a Perl binding where LaTeXML looks for `\\usepackage`'s files: the server's working directory
    (removed with the rest after the conversion)."""
    shutil.copy(binding, server._session.work / binding.name)


@pytest.fixture(scope="module")
def started() -> Iterator[WarmServer]:
    latexmlc_path()  # raises EngineMissing ("... apt-get install latexml") instead of skipping
    server = WarmServer(Profile(), limits=LIMITS)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(started: WarmServer) -> WarmServer:
    """The module's document server, started again when a test before left it broken."""
    if not started.alive():
        started.start()
    return started


# -- a clean state for every conversion ----------------------------------------------------------------


def test_definitions_counters_and_global_assignments_of_a_conversion_are_not_seen_by_the_next(server):
    defined = document(
        "\\def\\foo{FOO}\\global\\def\\gfoo{GFOO}\\newcommand{\\nfoo}{NFOO}"
        "\\setcounter{equation}{41}\\stepcounter{equation}\\global\\advance\\count0 by 7 "
        "\\newcounter{mine}\\setcounter{mine}{9}"
        "\\foo\\gfoo\\nfoo[\\theequation][\\the\\count0][\\themine]"
    )
    answer = server.convert(defined, timeout=TIMEOUT)
    assert answer["status"] == "no_problem", answer["log"][-1500:]
    assert "FOOGFOONFOO[42][7][9]" in answer["result"]

    used = server.convert(document("\\foo\\gfoo\\nfoo[\\theequation][\\the\\count0]\\themine"), timeout=TIMEOUT)
    assert (used["status"], used["status_code"]) == ("error", 2)
    for name in ("\\foo", "\\gfoo", "\\nfoo", "\\themine"):
        assert f"Error:undefined:{name} " in used["log"], name
    assert "[0][0]" in used["result"]
    assert_nothing_left(server)


def test_a_file_a_conversion_writes_is_gone_for_the_next_one(server):
    # TeX's \openout: LaTeXML keeps what is written in its memory, where the same conversion reads it back.
    # The paths are the sandbox's: its working directory (INSIDE_WORK) and its own /tmp (INSIDE_TMP).
    written = document(
        f"\\newwrite\\out\\immediate\\openout\\out={INSIDE_WORK}/w.tex\\immediate\\write\\out{{WORKMARK}}"
        f"\\immediate\\closeout\\out\\input{{{INSIDE_WORK}/w.tex}}"
        f"\\immediate\\openout\\out={INSIDE_TMP}/w.tex\\immediate\\write\\out{{TMPMARK}}\\immediate\\closeout\\out"
        f"\\input{{{INSIDE_TMP}/w.tex}}"
    )
    answer = server.convert(written, timeout=TIMEOUT)
    assert answer["status"] == "no_problem" and "WORKMARK" in answer["result"] and "TMPMARK" in answer["result"]
    # Files on disk: a binding writes one into /work and one into /tmp, which the same conversion sees.
    place(server, WARM / "plant.sty.ltxml")
    seen = (
        f"\\IfFileExists{{{INSIDE_WORK}/planted.tex}}{{WORKSEEN}}{{WORKGONE}}"
        " \\IfFileExists{/tmp/planted.tex}{TMPSEEN}{TMPGONE}"
    )
    planted = server.convert(document(seen, "\\usepackage{plant}"), timeout=TIMEOUT)
    assert planted["status"] == "no_problem", planted["log"][-1500:]
    assert "WORKSEEN TMPSEEN" in planted["result"]
    assert_nothing_left(server)

    # The next conversion sees its own files (the control) and none of those.
    looked = server.convert(
        document(
            f"{seen} \\IfFileExists{{{INSIDE_WORK}/result.html}}{{RESULTSEEN}}{{RESULTGONE}}"
            f" \\IfFileExists{{{INSIDE_WORK}/input.tex}}{{OWNSEEN}}{{OWNGONE}}"
            f" \\input{{{INSIDE_WORK}/w.tex}}\\input{{{INSIDE_TMP}/w.tex}}"
        ),
        timeout=TIMEOUT,
    )
    assert "WORKGONE TMPGONE RESULTGONE OWNSEEN" in looked["result"], looked["result"][-2000:]
    assert f"Error:missing_file:{INSIDE_WORK}/w.tex " in looked["log"]
    assert f"Error:missing_file:{INSIDE_TMP}/w.tex " in looked["log"]
    assert_nothing_left(server)


# -- hostile input: the fatal line of the cold engine, and the server serves on ----------------------------


def cold(tex: str, *, timeout: float, profile: Profile | None = None, limits: Limits = LIMITS) -> dict:
    """The cold engine's answer for `tex` with the same profile and limits."""
    profile = profile or Profile()
    return convert_text(tex, timeout=timeout, memory_mb=limits.memory_mb, disk_mb=limits.disk_mb,
                        max_processes=limits.max_processes, **asdict(profile))  # fmt: skip


def test_an_endless_loop_ends_at_the_timeout_with_the_cold_engine_s_fatal_line_and_the_server_serves_on(server):
    tex = document("\\loop\\iftrue\\repeat")
    started = time.monotonic()
    answer = server.convert(tex, timeout=SHORT_TIMEOUT)
    seconds = time.monotonic() - started
    expected = [f"Fatal:timeout:timedout Conversion exceeded the timeout of {SHORT_TIMEOUT} seconds"]
    assert fatal_lines(answer) == expected and answer["status_code"] == 3, answer["log"][-1500:]
    assert SHORT_TIMEOUT <= seconds < SHORT_TIMEOUT + END_SECONDS
    assert fatal_lines(cold(tex, timeout=SHORT_TIMEOUT)) == expected
    assert_nothing_left(server)
    assert_serves(server)


def test_a_deep_recursion_ends_with_the_cold_engine_s_fatal_line_and_the_server_serves_on(server):
    tex = document("\\def\\r{{\\r}}\\r")
    answer = server.convert(tex, timeout=TIMEOUT)
    assert answer["status_code"] == 3
    assert [line.split(" ")[0] for line in fatal_lines(answer)] == ["Fatal:perl:deep_recursion"], answer["log"][-1500:]
    assert without_last_read(fatal_lines(answer)) == without_last_read(fatal_lines(cold(tex, timeout=TIMEOUT)))
    assert_nothing_left(server)
    assert_serves(server)


def without_last_read(lines: list[str]) -> list[str]:
    """Perl's messages without the handle it read last (`, <$IN> line 1.`), which it adds when that handle
    is still open: a forked conversion may have left one open that a cold latexmlc had closed."""
    return [re.sub(r"(, <[^>]*> (line|chunk) \d+)?\.$", "", line) for line in lines]


def test_a_macro_that_doubles_its_argument_ends_out_of_memory_at_the_limit_and_the_server_serves_on(server):
    """Perl's allocation fails at the address-space limit the sandbox's first process got (RLIMIT_AS, which
    the child inherits): it dies saying "Out of memory", and the log says so with the limit, as a cold
    latexmlc's does. Where the cgroup's memory cap (page cache included) comes first, the kernel ends it
    and the log says that, naming the same limit: either is the engine's out-of-memory fatal."""
    tex = document("\\def\\a#1{\\a{#1#1}}\\a{x}")
    out_of_memory = (
        f"Fatal:perl:out_of_memory latexmlc ran out of memory (limit {LIMITS.memory_mb} MB)",
        "Fatal:perl:out_of_memory the conversion's processes together passed its memory limit of"
        f" {LIMITS.memory_mb} MB",
    )
    started = time.monotonic()
    answer = server.convert(tex, timeout=TIMEOUT)
    assert len(fatal_lines(answer)) == 1 and fatal_lines(answer)[0] in out_of_memory, answer["log"][-1500:]
    assert answer["status_code"] == 3 and time.monotonic() - started < TIMEOUT
    cold_lines = fatal_lines(cold(tex, timeout=TIMEOUT))
    assert len(cold_lines) == 1 and cold_lines[0] in out_of_memory, cold_lines
    if fatal_lines(answer)[0] == out_of_memory[1]:
        # The kernel may have ended the parent as well: a server whose cgroup killed is started again.
        assert server.broken == "its cgroup's memory limit ended one of its processes"
        server.start()
    assert_nothing_left(server)
    assert_serves(server)


def test_helpers_past_the_process_limit_end_the_conversion_and_not_the_next_ones():
    """html4 makes images of formulas with latex, a process of its own: with a limit of one process the
    conversion (the parent's child) may start none. The kill counts only that conversion's refused forks:
    the next conversion, which starts no helper, converts."""
    limits = Limits(timeout=TIMEOUT, memory_mb=1024, disk_mb=64, max_processes=1)
    profile = Profile(format="html4")
    server = WarmServer(profile, limits=limits)
    server.start()
    try:
        for _ in range(2):
            answer = server.convert(document("$x^{2}$"), timeout=TIMEOUT)
            expected = ["Fatal:limit:processes the conversion tried to run more than its limit of 1 processes at once"]
            assert fatal_lines(answer) == expected, answer["log"][-1500:]
            assert_nothing_left(server)
            plain = server.convert(document("Plain text."), timeout=TIMEOUT)
            assert plain["status"] == "no_problem" and "Plain text." in plain["result"], plain["log"][-1500:]
        assert fatal_lines(cold(document("$x^{2}$"), timeout=TIMEOUT, profile=profile, limits=limits)) == expected
    finally:
        server.stop()


# -- limits that need Perl code: a binding placed in the working directory ------------------------------


def test_a_fork_bomb_ends_at_the_process_limit_and_the_server_serves_on(server):
    place(server, HOSTILE / "forkbomb" / "forkbomb.sty.ltxml")
    started = time.monotonic()
    answer = server.convert(document("A fork bomb.", "\\usepackage{forkbomb}"), timeout=TIMEOUT)
    expected = [
        f"Fatal:limit:processes the conversion tried to run more than its limit of {LIMITS.max_processes}"
        " processes at once"
    ]
    assert fatal_lines(answer) == expected, answer["log"][-1500:]
    assert time.monotonic() - started < TIMEOUT
    assert_nothing_left(server)
    assert_serves(server)


@pytest.mark.parametrize("name", ["diskfill", "tmpfill"])
def test_a_writer_without_end_ends_at_the_disk_limit_and_the_server_serves_on(server, name):
    """diskfill writes 1 MB files into /work, tmpfill into /tmp: both count against the disk limit."""
    place(server, HOSTILE / name / f"{name}.sty.ltxml")
    started = time.monotonic()
    answer = server.convert(document("A filler.", f"\\usepackage{{{name}}}"), timeout=TIMEOUT)
    expected = [
        f"Fatal:limit:disk the conversion wrote more than its disk limit of {LIMITS.disk_mb} MB"
        " (its working directory and /tmp together)"
    ]
    assert fatal_lines(answer) == expected, answer["log"][-1500:]
    assert time.monotonic() - started < TIMEOUT
    assert_nothing_left(server)
    assert_serves(server)


def test_a_conversion_that_ignores_sigterm_with_an_orphaned_helper_ends_at_the_timeout_with_both(server):
    place(server, HOSTILE / "sigterm" / "sigterm.sty.ltxml")
    started = time.monotonic()
    answer = server.convert(document("Deaf.", "\\usepackage{sigterm}"), timeout=SHORT_TIMEOUT)
    seconds = time.monotonic() - started
    assert fatal_lines(answer) == [f"Fatal:timeout:timedout Conversion exceeded the timeout of {SHORT_TIMEOUT} seconds"]
    assert SHORT_TIMEOUT <= seconds < SHORT_TIMEOUT + END_SECONDS
    assert_nothing_left(server)
    assert_serves(server)


def test_a_pool_stopped_while_its_server_starts_leaves_no_process_and_no_files():
    # As when `up` stops the warm engine while a pool starts or restarts a server: stop() cuts the start short
    # and returns once it has removed what it made, so the process can end with nothing left behind.
    prefix = scratch_prefix("cortex-warm-")

    def mine() -> set[str]:
        return {path.name for path in Path(tempfile.gettempdir()).iterdir() if path.name.startswith(prefix)}

    before = mine()
    pool = WarmPool(Profile(), 1, limits=LIMITS)
    pool.start()
    (server,) = pool.servers
    wait_until(lambda: server.process is not None, RESTART_SECONDS, 0.01, "the server's start to begin")
    process = server.process
    pool.stop()
    assert pool.status()["starting"] == 0
    assert process.poll() is not None
    assert mine() == before


def test_a_process_left_behind_by_a_conversion_makes_its_pool_start_the_server_again():
    pool = WarmPool(Profile(), 1, limits=LIMITS)
    pool.start()
    try:
        server = pool.acquire(time.monotonic() + RESTART_SECONDS)
        assert server is not None, pool.status()
        old_parent = parent_of(server)
        place(server, WARM / "leftover.sty.ltxml")
        answer = server.convert(document("Left.", "\\usepackage{leftover}"), timeout=TIMEOUT)
        assert answer["status"] == "no_problem" and "Left." in answer["result"], answer["log"][-1500:]
        assert not server.alive() and server.broken == "a process of the last conversion outlived it"
        # The helper is killed at once; only the resident processes wait for the restart.
        assert namespace_processes(server) == {server.first, old_parent}
        pool.release(server, elapsed_ms=1.0)

        def started_again() -> bool:
            status = pool.status()
            return status["restarts"] == 1 and status["ready"] == 1 and status["starting"] == 0

        wait_until(started_again, RESTART_SECONDS, 0.05, "the server to start again")
        again = pool.acquire(time.monotonic() + RESTART_SECONDS)
        assert again is server and parent_of(again) != old_parent
        assert_serves(again)
        assert_nothing_left(again)
        pool.release(again, elapsed_ms=1.0)
    finally:
        pool.stop()


# -- the parent ------------------------------------------------------------------------------------------


def test_the_parent_is_not_dumpable_so_a_conversion_cannot_read_its_memory(server):
    """The parent set PR_SET_DUMPABLE to 0: the kernel then gives its /proc files to root, whatever its user
    (proc(5)), and a process of its user without CAP_SYS_PTRACE (a conversion, its own child) can open
    neither its memory nor its environment; the sandbox's first process, of the same user and dumpable,
    is the control."""
    parent = parent_of(server)
    owner = os.stat(f"/proc/{parent}/status").st_uid
    real_uid = int(next(line for line in Path(f"/proc/{parent}/status").read_text().splitlines()
                        if line.startswith("Uid:")).split()[1])  # fmt: skip
    assert real_uid != 0, "the parent runs as root: the ownership of its /proc files says nothing"
    assert (os.stat(f"/proc/{parent}/mem").st_uid, owner) == (0, 0)
    assert os.stat(f"/proc/{server.first}/mem").st_uid == real_uid  # the control: dumpable, its user's

    place(server, WARM / "peek.sty.ltxml")
    answer = server.convert(document("\\peekreport", "\\usepackage{peek}"), timeout=TIMEOUT)
    assert answer["status"] == "no_problem", answer["log"][-1500:]
    expected = "PEEK parent-mem=EACCES parent-environ=EACCES first-mem=opened first-environ=opened END"
    assert expected in answer["result"]
    assert_nothing_left(server)


@pytest.fixture(scope="module")
def engine() -> Iterator[WarmEngine]:
    """An engine with one formula server; its watch thread starts a server again whose parent died."""
    latexmlc_path()
    warm = WarmEngine({FORMULA: 1}, limits=LIMITS)
    warm.start()
    try:
        yield warm
    finally:
        warm.stop()


def ready_pool(engine: WarmEngine) -> dict:
    """The formula pool's status once its server is ready and idle."""

    def idle() -> dict | None:
        (status,) = engine.status()
        return status if (status["ready"], status["busy"], status["starting"]) == (1, 0, 0) else None

    return wait_until(idle, RESTART_SECONDS, 0.05, "the formula server, ready and idle")


def assert_engine_serves(engine: WarmEngine) -> None:
    answer = engine.convert(FORMULA, "x^2", timeout=TIMEOUT, wait=RESTART_SECONDS)
    assert answer["status"] == "no_problem" and "<msup><mi>x</mi><mn>2</mn></msup>" in unspaced(answer["result"])


def test_a_killed_idle_parent_is_started_again_by_the_engine_and_serves(engine):
    before = ready_pool(engine)
    (server,) = engine.pools[FORMULA].servers
    os.kill(parent_of(server), signal.SIGKILL)

    seen: list[dict] = []

    def restarted() -> dict | None:
        (status,) = engine.status()
        seen.append(status)
        started = status["restarts"] == before["restarts"] + 1 and status["pids"] != before["pids"]
        return status if started and status["ready"] == 1 and status["starting"] == 0 else None

    status = wait_until(restarted, RESTART_SECONDS, 0.01, "the engine to start the server again")
    assert status["last_error"] == "its parent ended"
    # Seen while it started (which takes a second or more), and then counted as starting, not as ready too.
    assert any(each["starting"] for each in seen)
    assert all(each["ready"] + each["starting"] <= 1 and each["busy"] <= each["ready"] for each in seen), seen
    assert_engine_serves(engine)


def test_a_request_in_flight_when_its_parent_dies_is_unavailable_and_the_next_is_served(engine):
    before = ready_pool(engine)
    (server,) = engine.pools[FORMULA].servers
    outcome: list[object] = []

    def convert() -> None:
        try:
            outcome.append(engine.convert(FORMULA, "\\loop\\iftrue\\repeat", timeout=TIMEOUT, wait=RESTART_SECONDS))
        except Exception as exc:  # the test asserts on it
            outcome.append(exc)

    thread = threading.Thread(target=convert, daemon=True)
    thread.start()
    parent = parent_of(server)
    wait_until(lambda: Path(f"/proc/{parent}/task/{parent}/children").read_text().split(), TIMEOUT, 0.01,
               "the conversion's child")  # fmt: skip
    killed = time.monotonic()
    os.kill(parent, signal.SIGKILL)
    thread.join(END_SECONDS)
    assert not thread.is_alive(), "the request did not end when its server's parent died"
    assert time.monotonic() - killed < END_SECONDS
    (error,) = outcome
    assert isinstance(error, WarmUnavailable), error
    assert str(error).startswith(f"the warm server for {FORMULA.name} ended during the conversion")
    after = ready_pool(engine)
    assert after["failed"] == before["failed"] + 1 and after["restarts"] == before["restarts"] + 1
    assert_engine_serves(engine)


# -- the socket ----------------------------------------------------------------------------------------


def test_a_request_waits_behind_a_short_conversion_and_not_behind_a_long_one(engine):
    ready_pool(engine)
    pool = engine.pools[FORMULA]
    # Behind a formula: the wait is a conversion's, well under the second it may wait, so it is served.
    outcome: list = []
    first = threading.Thread(target=lambda: outcome.append(engine.convert(FORMULA, "y^2", timeout=TIMEOUT, wait=5)))
    first.start()
    wait_until(lambda: pool.status()["busy"] == 1, RESTART_SECONDS, 0.005, "the first formula converting")
    assert engine.convert(FORMULA, "z^2", timeout=TIMEOUT, wait=5)["status"] == "no_problem"
    first.join(TIMEOUT)
    # Behind a conversion that has run 2 s: the wait would outlast the 1 s allowed, so it is refused at once.
    loop = threading.Thread(
        target=lambda: outcome.append(engine.convert(FORMULA, "\\loop\\iftrue\\repeat", timeout=SHORT_TIMEOUT, wait=5))
    )
    loop.start()
    wait_until(lambda: pool.status()["busy"] == 1, RESTART_SECONDS, 0.005, "the loop converting")
    server = pool.servers[0]
    wait_until(lambda: server.busy_since is not None and time.monotonic() - server.busy_since >= 2,
               SHORT_TIMEOUT, 0.01, "the loop running for 2 s")  # fmt: skip
    started = time.monotonic()
    with pytest.raises(WarmUnavailable, match="has no free server"):
        engine.convert(FORMULA, "x", timeout=TIMEOUT, wait=1)
    assert time.monotonic() - started < 0.5
    loop.join(TIMEOUT)
    assert [answer["status"] for answer in outcome] == ["no_problem", "fatal"]
    assert_engine_serves(engine)


@pytest.fixture
def socket_path(engine: WarmEngine) -> Iterator[Path]:
    """The engine answering on a socket of its own (a short path: a Unix socket's is at most 107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="ccs-warm-"))
    path = directory / "run" / "engine.sock"
    try:
        with serving(engine, path) as server:
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            thread.start()
            try:
                yield path
            finally:
                server.shutdown()
                thread.join(10)
        assert not path.exists()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_socket_answers_a_conversion_and_the_status(engine, socket_path):
    ready_pool(engine)
    message = {"op": "convert", "profile": asdict(FORMULA), "tex": "literal:x^2", "timeout": TIMEOUT,
               "wait": RESTART_SECONDS}  # fmt: skip
    answer = request(socket_path, message, timeout=TIMEOUT + RESTART_SECONDS)
    assert (answer["status"], answer["status_code"]) == ("no_problem", 0)
    assert "<msup><mi>x</mi><mn>2</mn></msup>" in unspaced(answer["result"]) and "Status:conversion:0" in answer["log"]
    (pool,) = request(socket_path, {"op": "status"}, timeout=10)["pools"]
    assert pool["profile"] == FORMULA.name and pool["served"] >= 1 and pool["ready"] == 1


def test_a_request_to_a_missing_socket_is_unavailable(tmp_path):
    with pytest.raises(WarmUnavailable, match="the warm engine is not running"):
        request(tmp_path / "nothing.sock", {"op": "status"}, timeout=5)


def raw(path: Path, line: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(10)
        connection.connect(str(path))
        connection.sendall(line)
        with connection.makefile("rb") as reader:
            return reader.readline()


def test_a_bad_request_is_answered_with_an_error_and_leaves_the_servers_as_they_were(engine, socket_path):
    before = ready_pool(engine)
    for line in (b"not json\n", b"[1, 2]\n", b"\n"):
        assert raw(socket_path, line).startswith(b'{"error": "bad request: '), line
    with pytest.raises(ValueError, match="unknown op"):
        request(socket_path, {"op": "format the disk"}, timeout=10)
    with pytest.raises(ValueError, match="bad request: format must be one of"):
        request(socket_path, {"op": "convert", "profile": {"format": "pdf"}, "tex": "x", "timeout": 5}, timeout=10)
    with pytest.raises(ValueError, match="bad request: "):
        request(socket_path, {"op": "convert", "profile": asdict(FORMULA), "tex": "x"}, timeout=10)  # no timeout
    for fields in ({"tex": "x", "timeout": float("nan")}, {"tex": "x", "timeout": 0}, {"tex": 5, "timeout": 5}):
        message = {"op": "convert", "profile": asdict(FORMULA), "wait": RESTART_SECONDS, **fields}
        with pytest.raises(ValueError, match="bad request: tex must be a string and timeout a positive number"):
            request(socket_path, message, timeout=10)
    after = ready_pool(engine)
    counts = ("served", "failed", "restarts")
    assert [after[name] for name in counts] == [before[name] for name in counts]


# -- what a killed engine leaves -------------------------------------------------------------------------


def test_the_directory_of_a_server_whose_process_was_killed_outright_is_swept(process_tmpdir):
    """A process killed with its server running cannot remove the server's directory (its server dies with
    it); the next sweep (a starting engine's, a cold conversion's) removes it."""
    started = subprocess.run(
        [sys.executable, "-c", "import os; from conversion.warm import Profile, WarmServer;"
         " from conversion.engine import Limits; WarmServer(Profile(), limits=Limits(10)).start();"
         " os.kill(os.getpid(), 9)"],
        cwd=PROJECT_DIR, env={**os.environ, "TMPDIR": str(process_tmpdir)}, timeout=RESTART_SECONDS, check=False,
    )  # fmt: skip
    assert started.returncode == -signal.SIGKILL, started.stderr
    (left,) = process_tmpdir.iterdir()
    assert left.name.startswith("cortex-warm-") and (left / "work").is_dir()
    assert scratch_sweep([str(process_tmpdir)]) == 1
    assert sorted(process_tmpdir.iterdir()) == []
