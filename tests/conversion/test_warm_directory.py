"""A warm server prepared with a worker's latexmlc options converts a paper's directory as the cold engine
does (conversion.warm.WarmServer.convert_directory), against the real latexmlc in the real sandbox."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from conversion import engine
from conversion.sandbox import INSIDE_WORK
from conversion.warm import WarmServer, source_name_check
from tests.support import write_tex

MAIN = r"""\documentclass{article}
\newcommand{\paperword}{Thermocline}
\begin{document}
\section{Introduction}\label{sec:intro}
A paper about \paperword{} with $x^2 + y^2 = z^2$.
\input{sections/body}
See Section~\ref{sec:body}.
\end{document}
"""
BODY = r"""\section{Body}\label{sec:body}
The second file's own words, Isobaric, with $\int_0^1 f(t)\,dt$ and Section~\ref{sec:intro}.
\begin{equation} E = mc^2 \end{equation}
"""
TIMEOUT = 60
# latexmlc's options as a worker gives them (conversion.engine.convert), with a destination in /work.
OPTIONS = [
    "--format=html5",
    f"--dest={INSIDE_WORK}/.cortex-output/document.html",
    f"--log={engine.LOG_NAME}",
    f"--timeout={engine.latexmlc_timeout(TIMEOUT)}",
]


def comparable(html: bytes) -> bytes:
    """The HTML without what differs between any two runs: the generation date and the ids."""
    html = re.sub(rb"Generated\s+on [^<>]*? by", b"Generated on DATE by", html)
    return re.sub(rb'\s(?:id|href|for)="[^"]*"', b"", html)


@pytest.fixture
def paper(tmp_path: Path) -> Path:
    write_tex(tmp_path / "paper" / "main.tex", MAIN)
    write_tex(tmp_path / "paper" / "sections" / "body.tex", BODY)
    return tmp_path / "paper"


@pytest.fixture
def server() -> Iterator[WarmServer]:
    engine.latexmlc_path()  # EngineMissing ("... apt-get install latexml") instead of a skip
    warm = WarmServer.for_options(OPTIONS, limits=engine.Limits(TIMEOUT))
    warm.start()
    try:
        yield warm
    finally:
        warm.stop()


@pytest.mark.slow
def test_a_paper_of_two_files_converts_warm_as_it_does_cold(tmp_path, paper, server):
    cold = engine.convert(paper, "main.tex", timeout=TIMEOUT)
    cold_html = (cold.output_dir / "main.html").read_bytes()
    warm = server.convert_directory(paper, "main.tex", timeout=TIMEOUT)
    assert (warm.status_code, warm.timed_out, warm.killed) == (cold.status_code, False, None) == (0, False, None)
    assert b"Thermocline" in warm.result and b"Isobaric" in warm.result  # both files were read
    assert comparable(warm.result) == comparable(cold_html)
    assert re.findall(rb"^Status:conversion:\d+$", warm.log, re.MULTILINE) == [b"Status:conversion:0"]
    assert warm.runtime_ms > 0 and (warm.cpu_ms is None) == (server._session.quota is None)
    assert warm.cpu_ms is None or warm.cpu_ms > 50  # the conversion's CPU time, not the idle parent's
    # The next conversion starts from a clean working directory and writes the same again.
    again = server.convert_directory(paper, "main.tex", timeout=TIMEOUT)
    assert again.status_code == 0 and comparable(again.result) == comparable(cold_html)
    assert server.alive() and server.served == 2


@pytest.mark.parametrize(
    "main_file",
    ["../main.tex", f"{INSIDE_WORK}/main.tex", "a/../main.tex", ".main.tex", "-main.tex", "a b.tex", "a//b.tex"],
)
def test_a_main_file_that_is_not_a_plain_relative_path_is_refused(main_file):
    with pytest.raises(ValueError, match="relative path of plain names"):
        source_name_check(main_file)


@pytest.mark.parametrize(
    "options", [[], ["--dest=/tmp/document.html"], [f"--dest={INSIDE_WORK}/../etc/x.html"], [f"--dest={INSIDE_WORK}"]]
)
def test_options_without_a_destination_file_inside_work_are_refused(options):
    with pytest.raises(ValueError, match="--dest"):
        WarmServer.for_options(options, limits=engine.Limits(TIMEOUT))


@pytest.mark.slow
def test_the_server_ignores_a_convert_line_whose_source_leaves_work(paper, server):
    """warm_server.pl checks the source as well: a line naming ../etc/passwd starts no conversion, so the
    next conversion's answer is its own."""
    server._session.send("convert 65 ../etc/passwd")
    warm = server.convert_directory(paper, "main.tex", timeout=TIMEOUT)
    assert warm.status_code == 0 and b"Thermocline" in warm.result and b"root:" not in warm.result
    assert server.alive()
