"""The LaTeXML log parser: each rule of conversion/logparse.py on small hand-written logs, then on logs that
the real latexmlc writes for documents made here (apt-get install latexml; a missing one fails)."""

from __future__ import annotations

import random
import re
import shutil
import string
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversion.choices import TaskStatus, completed_status_name
from conversion.logparse import DETAILS_MAX, Message, ParsedLog, parse_log, status_code_of
from tests.conversion.logparse_reference import parse_log_by_line


def triples(parsed: ParsedLog) -> list[tuple[str, str, str]]:
    return [(m.severity, m.category, m.what) for m in parsed.messages]


def problems(parsed: ParsedLog) -> list[tuple[str, str, str]]:
    return [t for t in triples(parsed) if t[0] != "info"]


# --- message lines -----------------------------------------------------------------------------


def test_a_message_line_gives_severity_category_what_and_details():
    parsed = parse_log("Error:undefined:\\foo The token T_CS[\\foo] is not defined.\nStatus:conversion:2\n")
    assert parsed.messages == [
        Message(severity="error", category="undefined", what="\\foo", details="The token T_CS[\\foo] is not defined.")
    ]


def test_a_message_line_without_details_has_empty_details():
    parsed = parse_log("Warning:expected:ids\nStatus:conversion:1\n")
    assert parsed.messages == [Message("warning", "expected", "ids", "")]


def test_severities_map_case_insensitively_and_warn_is_a_warning():
    log = "Warning:a:1 x\nWarn:b:2 x\nERROR:c:3 x\nfatal:d:4 x\nInfo:e:5 x\nwArNiNg:f:6 x\nStatus:conversion:3\n"
    assert [m.severity for m in parse_log(log).messages] == ["warning", "warning", "error", "fatal", "info", "warning"]


def test_a_line_whose_first_field_is_not_a_severity_is_not_a_message():
    log = (
        "http://example.org:8080/x y\n"
        "Scan:DBStatus:4/0 objects\n"
        "Debug:x:y z\n"
        "Conversion complete: No obvious problems\n"
        "Status:conversion:0\n"
    )
    parsed = parse_log(log)
    assert parsed.messages == []
    assert parsed.status == TaskStatus.NO_PROBLEM


def test_a_line_that_does_not_fit_the_message_pattern_is_not_a_message():
    # A space inside the category, or an empty what, does not match ^([^ :]+):([^ :]+):([^ ]+)...
    parsed = parse_log("Error:un defined:\\foo x\nError:undefined:\nError:undefined: x\nStatus:conversion:0\n")
    assert parsed.messages == []


# --- details continuation ----------------------------------------------------------------------


def test_tab_lines_continue_the_previous_messages_details():
    log = (
        "Error:undefined:\\foo The token T_CS[\\foo] is not defined.\n"
        "\tat doc.tex; line 3 col 9 - line 3 col 9\n"
        "\t <= Core::Stomach <= ...\n"
        "Status:conversion:2\n"
    )
    (message,) = parse_log(log).messages
    assert (
        message.details
        == "The token T_CS[\\foo] is not defined.\nat doc.tex; line 3 col 9 - line 3 col 9\n <= Core::Stomach <= ..."
    )


def test_tab_lines_after_a_message_without_details_do_not_start_with_a_newline():
    (message,) = parse_log("Fatal:timeout:timedout\n\tafter 60 seconds\nStatus:conversion:3\n").messages
    assert message.details == "after 60 seconds"


def test_a_non_tab_line_ends_the_details_and_later_tab_lines_are_not_attached():
    log = "Warning:expected:ids Missing\n\tfirst\n 0.00 sec)\n\tstray\nStatus:conversion:1\n"
    (message,) = parse_log(log).messages
    assert message.details == "Missing\nfirst"


def test_tab_lines_with_no_message_before_them_are_dropped():
    parsed = parse_log("\torphan\nStatus:conversion:0\n\tafter status\n")
    assert parsed.messages == []
    assert parsed.status == TaskStatus.NO_PROBLEM


def test_details_stay_within_2000_characters_however_many_tab_lines_follow():
    log = "Error:x:y " + "d" * 1990 + "\n" + "\tmore text\n" * 5000 + "Status:conversion:2\n"
    (message,) = parse_log(log).messages
    assert len(message.details) == DETAILS_MAX
    assert message.details.startswith("d" * 1990 + "\nmore text")


def test_crlf_line_endings_are_read_like_lf():
    parsed = parse_log("Error:undefined:\\foo bad\r\n\tmore\r\nStatus:conversion:2\r\n")
    assert parsed.messages == [Message("error", "undefined", "\\foo", "bad\nmore")]
    assert parsed.status == TaskStatus.ERROR


# --- loaded files -------------------------------------------------------------------------------


def test_loading_and_processing_definitions_lines_are_loaded_file_infos_with_the_bare_path():
    log = (
        "(Loading /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml...\n"
        "(Loading /usr/share/perl5/LaTeXML/Package/eTeX.pool.ltxml... 0.00 sec)\n"
        "(Loading /usr/share/perl5/LaTeXML/Package/pdfTeX.pool.ltxml... 0.01 sec) 0.16 sec)\n"
        "(Processing definitions /usr/share/texlive/texmf-dist/tex/latex/base/ts1enc.dfu... 0.03 sec) 0.11 sec)\n"
        "(Loading compiled schema /usr/share/perl5/LaTeXML/resources/RelaxNG/LaTeXML.model... 0.01 sec) 0.06 sec)\n"
        "Status:conversion:0\n"
    )
    assert triples(parse_log(log)) == [
        ("info", "loaded_file", "/usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml"),
        ("info", "loaded_file", "/usr/share/perl5/LaTeXML/Package/eTeX.pool.ltxml"),
        ("info", "loaded_file", "/usr/share/perl5/LaTeXML/Package/pdfTeX.pool.ltxml"),
        ("info", "loaded_file", "/usr/share/texlive/texmf-dist/tex/latex/base/ts1enc.dfu"),
        ("info", "loaded_file", "/usr/share/perl5/LaTeXML/resources/RelaxNG/LaTeXML.model"),
    ]


def test_a_load_after_timing_text_on_the_same_line_is_found_too():
    log = "(Loading /a/x.sty.ltxml... 0.01 sec) (Loading /b/y.sty.ltxml... 0.02 sec) 0.17 sec)\nStatus:conversion:0\n"
    assert [m.what for m in parse_log(log).messages] == ["/a/x.sty.ltxml", "/b/y.sty.ltxml"]


def test_other_progress_lines_and_a_load_cut_off_before_its_dots_are_not_messages():
    log = "(Digesting TeX doc...\n(Processing content /tmp/doc.tex...\n(Building...\n(Loading /usr/share/x.st\n"
    assert parse_log(log).messages == []


def test_messages_keep_log_order_between_loaded_files():
    log = (
        "(Loading /p/article.cls.ltxml... 0.01 sec)\n"
        "Warning:missing_file:nosuch Can't find binding for package nosuch\n"
        "\tat doc.tex; line 3 col 6 - line 3 col 6\n"
        " 0.30 sec) 0.30 sec)\n"
        "(Loading /p/graphicx.sty.ltxml... 0.01 sec)\n"
        "Status:conversion:1\n"
    )
    assert triples(parse_log(log)) == [
        ("info", "loaded_file", "/p/article.cls.ltxml"),
        ("warning", "missing_file", "nosuch"),
        ("info", "loaded_file", "/p/graphicx.sty.ltxml"),
    ]


# --- status -------------------------------------------------------------------------------------


def test_a_status_line_sets_the_status_and_is_not_a_message():
    for code, status in [
        (0, TaskStatus.NO_PROBLEM),
        (1, TaskStatus.WARNING),
        (2, TaskStatus.ERROR),
        (3, TaskStatus.FATAL),
    ]:
        parsed = parse_log(f"Warning:expected:ids x\nStatus:conversion:{code}\n")
        assert (parsed.status, parsed.status_code) == (status, code)
        assert triples(parsed) == [("warning", "expected", "ids")]


def test_a_log_without_a_status_line_is_fatal_with_no_status_code():
    parsed = parse_log("(Loading /a/TeX.pool.ltxml...\nWarning:expected:ids x\n")
    assert (parsed.status, parsed.status_code) == (TaskStatus.FATAL, None)


def test_the_most_severe_of_several_status_lines_counts():
    parsed = parse_log("Status:conversion:0\nFatal:timeout:timedout killed\nStatus:conversion:3\nStatus:conversion:1\n")
    assert (parsed.status, parsed.status_code) == (TaskStatus.FATAL, 3)


def test_an_appended_log_keeps_the_worst_status_even_when_a_clean_run_comes_last():
    # Two runs' output in one log: the fatal run's messages are kept, so the status may not be no_problem.
    log = b"Fatal:perl:die first run\nStatus:conversion:3\nInfo:note:x second run\nStatus:conversion:0\n"
    assert status_code_of(log) == parse_log(log).status_code == 3
    assert parse_log(log).status == TaskStatus.FATAL


def _status_code_by_the_message_rule(text: str) -> int | None:
    """The status lines as the message rule reads them, line by line."""
    codes = []
    lines = text.split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    for line in lines:
        match = re.match(r"^([^ :]+):([^ :]+):([^ ]+)(\s(.*))?$", line)
        is_status = match and match[1].lower() == "status" and match[2].lower() == "conversion"
        if is_status and re.fullmatch(r"[0-9]{1,18}", match[3]):
            codes.append(int(match[3]))
    return max(codes) if codes else None


def test_the_status_line_reading_agrees_with_the_message_rule_on_odd_lines():
    pieces = ["Status", "STATUS", "status", "conversion", "Conversion", ":", "0", "2", "3", "12", " ", "\t", "\r",
              "\n", "x", "-1", "\u212a", "9" * 19]  # fmt: skip
    rng = random.Random(20261123)
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        if rng.random() < 0.5:
            text = f"{rng.choice(['Status', 'status'])}:conversion:{rng.choice(['1', '3', '01'])}{text}"
        expected = _status_code_by_the_message_rule(text)
        assert status_code_of(text) == parse_log(text).status_code == expected, repr(text)


def test_a_status_code_outside_0_to_3_is_fatal_not_a_blocked_status():
    parsed = parse_log("Status:conversion:7\n")
    assert (parsed.status, parsed.status_code) == (TaskStatus.FATAL, 7)


def test_a_malformed_status_line_is_ignored():
    parsed = parse_log("Status:conversion:two\nStatus:conversion:" + "9" * 5000 + "\n")
    assert (parsed.status, parsed.status_code, parsed.messages) == (TaskStatus.FATAL, None, [])


def test_fatal_invalid_makes_the_task_invalid_whatever_the_status_line_says():
    parsed = parse_log("Fatal:invalid:binary main source is a binary file\nStatus:conversion:0\n")
    assert (parsed.status, parsed.status_code) == (TaskStatus.INVALID, 0)
    assert triples(parsed) == [("fatal", "invalid", "binary")]
    assert parse_log("Fatal:invalid:archive no main source\n").status == TaskStatus.INVALID


def test_other_fatal_messages_do_not_make_the_task_invalid():
    assert (
        parse_log("Fatal:missing_file:invalid x\nError:invalid:x y\nStatus:conversion:3\n").status == TaskStatus.FATAL
    )


# --- runtime ------------------------------------------------------------------------------------


def test_the_runtime_line_sets_runtime_ms_and_is_not_a_message():
    parsed = parse_log("Status:conversion:0\nInfo:runtime_ms:2345\n")
    assert (parsed.runtime_ms, parsed.messages) == (2345, [])


def test_the_cpu_and_peak_memory_lines_set_their_measures_and_are_not_messages():
    parsed = parse_log("Status:conversion:0\nInfo:runtime_ms:2345\nInfo:cpu_ms:1870\nInfo:peak_rss_kb:204800\n")
    assert (parsed.runtime_ms, parsed.cpu_ms, parsed.peak_rss_kb, parsed.messages) == (2345, 1870, 204800, [])
    assert (parse_log("Status:conversion:0\n").cpu_ms, parse_log("Status:conversion:0\n").peak_rss_kb) == (None, None)


def test_a_log_without_a_runtime_line_has_no_runtime():
    assert parse_log("Status:conversion:0\n").runtime_ms is None


def test_a_runtime_line_that_is_not_a_number_stays_an_ordinary_info_message():
    parsed = parse_log("Info:runtime_ms:soon x\nStatus:conversion:0\n")
    assert parsed.runtime_ms is None
    assert triples(parsed) == [("info", "runtime_ms", "soon")]


# --- caps, encodings, hostile input -------------------------------------------------------------


def test_category_what_and_details_are_capped():
    log = f"Error:{'c' * 150}:{'w' * 300} {'d' * 3000}\n(Loading /{'p' * 300}.sty...\nStatus:conversion:2\n"
    error, loaded = parse_log(log).messages
    assert (len(error.category), len(error.what), len(error.details)) == (100, 200, 2000)
    assert len(loaded.what) == 200


def test_non_utf8_bytes_are_replaced_not_raised():
    parsed = parse_log(b"Error:undefined:\\caf\xe9 caf\xe9 \xff\xfe\nStatus:conversion:2\n")
    assert parsed.status == TaskStatus.ERROR
    assert parsed.messages == [Message("error", "undefined", "\\caf\ufffd", "caf\ufffd \ufffd\ufffd")]


def test_a_byte_order_mark_does_not_hide_the_first_line():
    parsed = parse_log(b"\xef\xbb\xbfError:undefined:\\foo x\nStatus:conversion:2\n")
    assert (parsed.status, triples(parsed)) == (TaskStatus.ERROR, [("error", "undefined", "\\foo")])


def test_nul_characters_are_stripped_from_every_field():
    parsed = parse_log(
        b"Err\x00or:unde\x00fined:\\f\x00oo de\x00tails\n\tmo\x00re\n(Loading /a/b\x00.sty...\nStatus:conversion:2\n"
    )
    assert parsed.messages == [
        Message("error", "undefined", "\\foo", "details\nmore"),
        Message("info", "loaded_file", "/a/b.sty", ""),
    ]
    assert parsed.status == TaskStatus.ERROR


def test_a_str_log_with_lone_surrogates_comes_out_storable():
    parsed = parse_log("Error:x:y bad \udcff byte\nStatus:conversion:2\n")
    (message,) = parsed.messages
    message.details.encode("utf-8")  # raises if a surrogate survived
    assert message.details.startswith("bad ")


def test_an_empty_log_does_not_raise_and_is_fatal():
    assert parse_log(b"") == ParsedLog(status=TaskStatus.FATAL, status_code=None, messages=[], runtime_ms=None)
    assert parse_log("") == ParsedLog(status=TaskStatus.FATAL, status_code=None, messages=[], runtime_ms=None)


def test_five_megabytes_of_random_bytes_do_not_raise():
    garbage = random.Random(20260501).randbytes(5 * 1024 * 1024)
    parsed = parse_log(garbage + b"\nStatus:conversion:1\n")
    assert parsed.status == TaskStatus.WARNING
    for message in parsed.messages:
        assert "\x00" not in message.category + message.what + message.details
        assert len(message.category) <= 100 and len(message.what) <= 200 and len(message.details) <= 2000


def test_a_ten_megabyte_log_of_message_lines_parses_with_every_message():
    line = b"Warning:expected:ids Missing Target for Label: LABEL:x\n\tIn Post::CrossRef ->process\n"
    count = 10 * 1024 * 1024 // len(line)
    parsed = parse_log(line * count + b"Status:conversion:1\n")
    assert len(parsed.messages) == count
    assert parsed.messages[-1] == Message(
        "warning", "expected", "ids", "Missing Target for Label: LABEL:x\nIn Post::CrossRef ->process"
    )


# Lines built to sit on the edges of the rules: fields of a message line with and without spaces, colons,
# TABs and other whitespace (vertical tab, NEL, the Unicode line separator), empty fields, severities in
# any case, status and runtime lines, progress notes, long details, NUL and CR; joined by LF, CRLF, a
# continuation (LF TAB) or a lone CR.
_FIRSTS = ("Warning", "warning", "WARN", "Error", "Fatal", "Info", "info", "Status", "status", "Scan", "http", "",
           "Warn ing", "\tError", " Info", "\x0bError", "Error\r")  # fmt: skip
_FIELDS = ("conversion", "runtime_ms", "invalid", "undefined", "\\foo", "12", "-1", "0", "3", "", "a b", "x\ty",
           "p:q", "é", "\x85", "\u2028", "(Loading /x/y.sty...", "z" * 250, "\x00")  # fmt: skip
_SEPARATORS = (" ", "  ", "\t", "\x0b", "\x85", "\u2028", "\r", "")
_DETAILS = ("", "the details", "a: b: c", " (Loading /x/a.sty... 0.01 sec)", "y" * 1500, "\t", "\r")
_LINE_ENDS = ("\n", "\n", "\n", "\r\n", "\n\t", "\n\t\t", "\r", "\n\n")
_FREE = ("(Loading ", "(Processing definitions ", "RelaxNG ", "/usr/share/x.sty", "...", " 0.01 sec)", ":", " ",
         "\ufeff", "x")  # fmt: skip

_message_lines = st.tuples(
    st.sampled_from(_FIRSTS),
    st.sampled_from(_FIELDS),
    st.sampled_from(_FIELDS),
    st.sampled_from(_SEPARATORS),
    st.sampled_from(_DETAILS),
).map(lambda t: f"{t[0]}:{t[1]}:{t[2]}{t[3]}{t[4]}")
_free_lines = st.lists(st.sampled_from(_FREE + _FIELDS), max_size=6).map("".join)


@settings(max_examples=4000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.one_of(_message_lines, _free_lines), st.sampled_from(_LINE_ENDS)), max_size=25))
def test_the_one_pass_reading_agrees_with_the_line_by_line_rules_on_any_log(lines):
    log = "".join(line + end for line, end in lines)
    assert parse_log(log) == parse_log_by_line(log)
    assert parse_log(log.rstrip("\n")) == parse_log_by_line(log.rstrip("\n"))
    assert parse_log(log.encode()) == parse_log_by_line(log.encode())


def test_the_one_pass_reading_agrees_with_the_line_by_line_rules_on_random_text():
    chooser = random.Random(20261126)
    alphabet = "Wwarning:Error:info Status:conversion:2 \t\t\n\n\r(Loading x.sty...) runtime_ms:7\x0b\x85"
    for _ in range(2000):
        log = "".join(chooser.choice(alphabet) for _ in range(chooser.randrange(400)))
        assert parse_log(log) == parse_log_by_line(log)


def test_status_name_names_each_completed_status():
    assert [completed_status_name(s) for s in (-1, -2, -3, -4, -5)] == [
        "no_problem",
        "warning",
        "error",
        "fatal",
        "invalid",
    ]
    with pytest.raises(ValueError, match="-6"):
        completed_status_name(-6)


# --- real LaTeXML logs --------------------------------------------------------------------------

# 110 distinct undefined macros: LaTeXML stops at its 100-error limit with a fatal.
_UNDEFINED_MACROS = [f"\\undef{a}{b}" for a in "abc" for b in string.ascii_letters][:110]


def latexmlc_run(tmp_path: Path, body: str, preamble: str = "") -> tuple[bytes, int]:
    """Convert a small article with the real latexmlc; return its cortex.log and exit code."""
    latexmlc = shutil.which("latexmlc")
    if latexmlc is None:
        pytest.fail("latexmlc is not installed; these tests need the real one: apt-get install latexml")
    tex = f"\\documentclass{{article}}\n{preamble}\\begin{{document}}\n{body}\n\\end{{document}}\n"
    (tmp_path / "doc.tex").write_text(tex)
    argv = [latexmlc, "--format=html5", "--dest=out.html", "--log=cortex.log", "doc.tex"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=120)
    return (tmp_path / "cortex.log").read_bytes(), done.returncode


def assert_status_is_latexmlcs_own(parsed: ParsedLog, log: bytes, exit_code: int) -> None:
    (code,) = re.findall(rb"^Status:conversion:(\d+)$", log, re.MULTILINE)
    assert (parsed.status_code, parsed.status) == (int(code), -(int(code) + 1))
    # latexmlc exits 1 exactly when the conversion is fatal.
    assert exit_code == (1 if parsed.status == TaskStatus.FATAL else 0)
    loaded = [m.what for m in parsed.messages if m.category == "loaded_file"]
    assert any(path.endswith("/article.cls.ltxml") for path in loaded)
    assert all(path.startswith("/") and "..." not in path and "sec)" not in path for path in loaded)
    assert parsed.runtime_ms is None  # latexmlc itself writes none; the worker appends it


@pytest.mark.slow
def test_a_real_clean_conversion_is_no_problem(tmp_path):
    log, exit_code = latexmlc_run(tmp_path, "Hello $x^2$ world.")
    parsed = parse_log(log)
    assert_status_is_latexmlcs_own(parsed, log, exit_code)
    assert parsed.status == TaskStatus.NO_PROBLEM
    assert problems(parsed) == []


@pytest.mark.slow
def test_a_real_missing_label_and_unknown_package_are_warnings(tmp_path):
    log, exit_code = latexmlc_run(tmp_path, "See~\\ref{sec:missing}.", preamble="\\usepackage{nosuchpackagexyz}\n")
    parsed = parse_log(log)
    assert_status_is_latexmlcs_own(parsed, log, exit_code)
    assert parsed.status == TaskStatus.WARNING
    assert problems(parsed) == [("warning", "missing_file", "nosuchpackagexyz"), ("warning", "expected", "ids")]
    missing_package = next(m for m in parsed.messages if m.category == "missing_file")
    assert missing_package.details.startswith("Can't find binding for package nosuchpackagexyz\nat doc.tex; line 3")


@pytest.mark.slow
def test_a_real_undefined_macro_is_an_error(tmp_path):
    log, exit_code = latexmlc_run(tmp_path, "Text \\foo{} more.")
    parsed = parse_log(log)
    assert_status_is_latexmlcs_own(parsed, log, exit_code)
    assert parsed.status == TaskStatus.ERROR
    assert problems(parsed) == [("error", "undefined", "\\foo")]
    (undefined,) = [m for m in parsed.messages if m.severity == "error"]
    assert undefined.details.startswith("The token T_CS[\\foo] is not defined.\nat doc.tex; line 3")


@pytest.mark.slow
def test_a_real_conversion_with_over_100_errors_ends_fatal(tmp_path):
    log, exit_code = latexmlc_run(tmp_path, " ".join(name + "{}" for name in _UNDEFINED_MACROS))
    parsed = parse_log(log)
    assert_status_is_latexmlcs_own(parsed, log, exit_code)
    assert (parsed.status, exit_code) == (TaskStatus.FATAL, 1)
    found = problems(parsed)
    assert found[-1] == ("fatal", "too_many_errors", "100")
    assert found[:-1] == [("error", "undefined", name) for name in _UNDEFINED_MACROS[:101]]
