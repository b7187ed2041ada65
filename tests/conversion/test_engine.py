"""The latexmlc wrapper against the real latexmlc (apt-get install latexml); a missing one fails the tests."""

from __future__ import annotations

import re
import stat
import time

import psutil
import pytest

from conversion.choices import TaskStatus
from conversion.engine import TERMINATE_GRACE_SECONDS, EngineMissing, Watch, convert, convert_text, latexmlc_path
from conversion.logparse import parse_log
from conversion.sandbox import Sandbox
from tests.support import installed_latexmlc_version, write_tex

DOCUMENT = "\\documentclass{article}\n\\begin{document}\nHello $x^2$ world.\n\\end{document}\n"
LOOPING = "\\documentclass{article}\n\\begin{document}\n\\loop\\iftrue\\repeat\n\\end{document}\n"
# Doubles a macro's text forever: memory grows until the limit stops it.
MEMORY_HOG = "\\documentclass{article}\n\\begin{document}\n\\def\\x{aaaaaaaa}\\loop\\edef\\x{\\x\\x}\\iftrue\\repeat\n\\end{document}\n"  # noqa: E501


@pytest.fixture
def latexmlc() -> str:
    # Raises EngineMissing ("... apt-get install latexml") instead of skipping.
    return latexmlc_path()


def status_lines(log: bytes) -> list[bytes]:
    return re.findall(rb"^Status:conversion:\d+$", log, re.MULTILINE)


def processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if any(text in part for part in cmdline) and process.pid != psutil.Process().pid:
            found.append(process)
    return found


@pytest.mark.slow
def test_a_clean_document_converts_to_html_with_status_zero_and_a_runtime(tmp_path, latexmlc):
    write_tex(tmp_path / "paper.tex", DOCUMENT)
    conversion = convert(tmp_path, "paper.tex", timeout=60)
    html = conversion.output_dir / "paper.html"
    assert html.is_file()
    assert "Hello" in html.read_text() and "<math" in html.read_text()
    assert (conversion.status_code, conversion.timed_out) == (0, False)
    assert status_lines(conversion.log) == [b"Status:conversion:0"]
    assert conversion.runtime_ms > 0
    assert conversion.log.endswith(
        f"\nInfo:runtime_ms:{conversion.runtime_ms}\nInfo:cpu_ms:{conversion.cpu_ms}\n".encode()
    )  # unwatched: no peak memory
    assert (tmp_path / "cortex.log").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("cgroups", ["auto", "off"])
def test_a_watched_conversion_logs_the_cpu_time_and_peak_memory_of_all_its_processes(
    tmp_path, latexmlc, monkeypatch, cgroups
):
    """With a cgroup its count is exact; without one, the tree's measured use is a lower bound. Either way
    latexmlc's own CPU time is in it (a conversion takes hundreds of ms of CPU), not only bwrap's."""
    monkeypatch.setenv("CONVERSION_CGROUPS", cgroups)
    write_tex(tmp_path / "paper.tex", DOCUMENT)
    watch = Watch()
    conversion = convert(tmp_path, "paper.tex", timeout=60, watch=watch)
    parsed = parse_log(conversion.log)
    assert parsed.status == TaskStatus.NO_PROBLEM and parsed.cpu_ms == conversion.cpu_ms
    assert parsed.cpu_ms >= 200, parsed.cpu_ms
    assert parsed.peak_rss_kb == watch.peak_rss // 1024 and parsed.peak_rss_kb > 20_000
    assert [m.category for m in parsed.messages if m.category in ("cpu_ms", "peak_rss_kb", "runtime_ms")] == []


@pytest.mark.slow
def test_a_document_that_loops_forever_is_killed_at_the_timeout_and_leaves_no_process(tmp_path, latexmlc):
    write_tex(tmp_path / "loop.tex", LOOPING)
    started = time.monotonic()
    conversion = convert(tmp_path, "loop.tex", timeout=3)
    elapsed = time.monotonic() - started
    assert conversion.timed_out and conversion.status_code == 3
    # Our deadline, not latexmlc's own (set 5 s later), ended it.
    assert 3 <= elapsed < 3 + TERMINATE_GRACE_SECONDS + 2
    killed = b"\nFatal:timeout:timedout Conversion exceeded the timeout of 3 seconds\nStatus:conversion:3\n"
    assert killed in conversion.log
    assert status_lines(conversion.log)[-1] == b"Status:conversion:3"
    assert re.search(rb"^Info:runtime_ms:\d+$", conversion.log, re.MULTILINE)
    assert processes_mentioning(str(tmp_path)) == []
    assert [child for child in psutil.Process().children(recursive=True) if "latexmlc" in str(child.cmdline())] == []


@pytest.mark.slow
def test_a_converter_that_ignores_sigterm_is_killed_with_its_whole_process_group(tmp_path):
    # A stand-in latexmlc that ignores SIGTERM and leaves a helper process running, as a hung one might.
    # Unsandboxed, so the pids it writes are the host's; tests/conversion/test_sandbox.py has the sandboxed case.
    script = tmp_path / "stubborn-latexmlc"
    script.write_text("#!/bin/sh\ntrap '' TERM\necho $$ > leader.pid\nsleep 300 &\necho $! > helper.pid\nsleep 300\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    source = tmp_path / "source"
    write_tex(source / "doc.tex", DOCUMENT)
    conversion = convert(source, "doc.tex", timeout=1, latexmlc=str(script), sandbox=Sandbox(mode="none"))
    assert conversion.timed_out and conversion.status_code == 3
    assert b"Fatal:timeout:timedout Conversion exceeded the timeout of 1 seconds" in conversion.log
    leader, helper = (int((source / name).read_text()) for name in ("leader.pid", "helper.pid"))
    assert not psutil.pid_exists(leader)  # our child: killed and reaped
    # The helper was re-parented to init when the leader died; init reaps it, but it must not be running.
    assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_a_document_over_the_memory_limit_is_fatal_with_a_reason(tmp_path, latexmlc):
    write_tex(tmp_path / "hog.tex", MEMORY_HOG)
    conversion = convert(tmp_path, "hog.tex", timeout=120, memory_mb=250)
    assert not conversion.timed_out and conversion.status_code == 3
    assert re.search(rb"^Fatal:perl:(out_of_memory|die) ", conversion.log, re.MULTILINE)
    assert status_lines(conversion.log)[-1] == b"Status:conversion:3"
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.slow
def test_a_main_file_named_like_an_option_is_read_as_a_file(tmp_path, latexmlc):
    write_tex(tmp_path / "-paper.tex", DOCUMENT)
    conversion = convert(tmp_path, "-paper.tex", timeout=60)
    assert conversion.status_code == 0
    assert (conversion.output_dir / "-paper.html").is_file()


def test_a_missing_latexmlc_raises_engine_missing_with_the_install_hint(tmp_path):
    write_tex(tmp_path / "paper.tex", DOCUMENT)
    with pytest.raises(EngineMissing, match=r"^latexmlc-not-here is not installed: apt-get install latexml$"):
        convert(tmp_path, "paper.tex", latexmlc="latexmlc-not-here")
    with pytest.raises(EngineMissing, match="apt-get install latexml"):
        convert_text("x", latexmlc="/nonexistent/latexmlc")


@pytest.mark.slow
def test_convert_text_turns_a_literal_formula_into_mathml(latexmlc):
    converted = convert_text("literal:x^2", whatsin="math", whatsout="math")
    assert (converted["status"], converted["status_code"]) == ("no_problem", 0)
    assert converted["result"].startswith("<math")
    assert "<msup>" in converted["result"] and "<mi>x</mi>" in converted["result"]
    assert "Status:conversion:0" in converted["log"]


@pytest.mark.slow
def test_formula_to_formula_defaults_to_presentation_mathml_even_as_xml(latexmlc):
    converted = convert_text("literal:a+b", whatsin="math", whatsout="math", format="xml")
    assert "<m:math" in converted["result"] and "<m:mo>+</m:mo>" in converted["result"]
    assert "<XMath>" not in converted["result"]


@pytest.mark.slow
def test_convert_text_reports_an_undefined_macro_as_an_error(latexmlc):
    converted = convert_text("Hello $x$ \\nosuchmacro", whatsin="fragment", whatsout="fragment")
    assert (converted["status"], converted["status_code"]) == ("error", 2)
    assert "Error:undefined:\\nosuchmacro" in converted["log"]
    assert "ltx_para" in converted["result"]


def test_convert_text_refuses_unknown_switch_values():
    with pytest.raises(ValueError, match="format"):
        convert_text("x", format="pdf")
    with pytest.raises(ValueError, match="whatsin"):
        convert_text("x", whatsin="page")
    with pytest.raises(ValueError, match="preload"):
        convert_text("x", preload=["../../etc/passwd"])


def test_the_engine_reads_a_log_with_several_status_lines_as_the_log_parser_does(tmp_path):
    """A log that was appended to (two runs: one with an error, then a clean one) holds two status lines:
    the conversion's status code is the most severe, the same code the dispatcher's parser reads."""
    script = tmp_path / "appending-latexmlc"
    script.write_text(
        "#!/bin/sh\nprintf 'Error:undefined:\\\\foo first run\\nStatus:conversion:2\\n"
        "Info:note:second run\\nStatus:conversion:0\\n' >> cortex.log\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    source = tmp_path / "source"
    write_tex(source / "doc.tex", DOCUMENT)
    conversion = convert(source, "doc.tex", timeout=30, latexmlc=str(script), sandbox=Sandbox(mode="none"))
    assert status_lines(conversion.log) == [b"Status:conversion:2", b"Status:conversion:0"]
    parsed = parse_log(conversion.log)
    assert conversion.status_code == parsed.status_code == 2
    assert parsed.status == TaskStatus.ERROR


def test_limit_checks_come_as_rarely_as_the_disk_room_allows_and_never_rarer_than_a_quarter_second():
    from conversion.engine import DISK_WRITE_BYTES_PER_SECOND, LIMIT_CHECK_SECONDS, check_interval

    assert check_interval(2 * 1024**3) == 0.25  # the default limit, barely used
    assert check_interval(0) == LIMIT_CHECK_SECONDS  # at the limit
    assert check_interval(40 * 1024**2) == LIMIT_CHECK_SECONDS  # a tight limit keeps the 50 ms checks
    room = DISK_WRITE_BYTES_PER_SECOND // 10
    assert check_interval(room) == pytest.approx(0.1)  # a writer at full speed reaches the limit no sooner


def test_the_wait_asks_its_limit_check_as_often_as_it_is_told(tmp_path):
    """`sleep 1` watched with a check every 0.25 s is checked about 5 times, not 20 (every 50 ms)."""
    import subprocess

    from conversion.engine import _wait_for_exit

    process = subprocess.Popen(["sleep", "1"])
    calls = []

    def over_limit() -> bool:
        calls.append(time.monotonic())
        return False

    try:
        outcome = _wait_for_exit(
            process.pid, time.monotonic() + 30, None, over_limit=over_limit, check_every=lambda: 0.25
        )
    finally:
        process.wait()
    assert outcome == "exited"
    assert 3 <= len(calls) <= 7, len(calls)


def test_the_engine_says_its_version_once_per_executable(tmp_path, latexmlc):
    from conversion.engine import engine_version

    assert engine_version(latexmlc) == installed_latexmlc_version()
    counter = tmp_path / "asked"
    script = tmp_path / "stand-in-engine"
    script.write_text(f"#!/bin/sh\necho x >> {counter}\necho 'stand-in 1.2.3'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    unconfined = Sandbox(mode="none")
    assert engine_version(str(script), sandbox=unconfined) == "stand-in 1.2.3"
    assert engine_version(str(script), sandbox=unconfined) == "stand-in 1.2.3"
    assert counter.read_text() == "x\n"  # asked once: the answer is kept for the process
    silent = tmp_path / "silent-engine"
    silent.write_text("#!/bin/sh\nexit 3\n")
    silent.chmod(silent.stat().st_mode | stat.S_IXUSR)
    assert engine_version(str(silent), sandbox=unconfined) == "unknown (exit code 3)"
