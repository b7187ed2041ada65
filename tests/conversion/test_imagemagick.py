"""Figures in the sandbox: ImageMagick reads PDF, EPS and PNG there under the policy of
conversion/imagemagick.py (the host's policy refuses PDF and PostScript), and a figure bomb ends with
that figure or that conversion, with its message."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from conversion import imagemagick
from conversion.engine import convert, latexmlc_path
from conversion.logparse import parse_log
from conversion.sandbox import host_with_policy
from tests.fixtures.papers import eps_bytes, pdf_bytes, png_bytes
from tests.support import write_tex

FIGURES = r"""\documentclass{article}
\usepackage{graphicx}
\begin{document}
Before. \includegraphics{plot.pdf} \includegraphics{sketch.eps} \includegraphics{photo.png} After.
\end{document}
"""


@pytest.fixture
def latexmlc() -> str:
    return latexmlc_path()


def problems(log: bytes) -> list[tuple[str, str, str]]:
    return [(m.severity, m.category, m.what) for m in parse_log(log).messages if m.severity in ("error", "fatal")]


def test_the_policy_allows_pdf_and_postscript_reads_and_keeps_within_the_conversions_limits():
    policy = imagemagick.policy_xml(memory_mb=4096, disk_mb=2048, timeout=300).decode()
    assert '<policy domain="resource" name="memory" value="512MiB"/>' in policy
    assert '<policy domain="resource" name="map" value="1024MiB"/>' in policy
    assert '<policy domain="resource" name="disk" value="1024MiB"/>' in policy
    assert '<policy domain="resource" name="time" value="150"/>' in policy
    assert f'<policy domain="resource" name="list-length" value="{imagemagick.MAX_PAGES}"/>' in policy
    # Everything is refused first; the later, narrower rules allow reads of the figure formats alone.
    rules = re.findall(r'domain="coder" rights="([^"]+)" pattern="([^"]+)"', policy)
    assert rules[0] == ("none", "*")
    assert ("read", "{" + ",".join(imagemagick.READ_CODERS) + "}") in rules
    assert "PDF" in imagemagick.READ_CODERS and "EPS" in imagemagick.READ_CODERS
    assert "PDF" not in imagemagick.WRITE_CODERS and "PS" not in imagemagick.WRITE_CODERS
    assert not re.search(r'pattern="[^"]*(URL|HTTP|MVG|MSL)', policy)
    small = imagemagick.policy_xml(memory_mb=64, disk_mb=8, timeout=2).decode()
    assert 'name="memory" value="16MiB"' in small and 'name="time" value="5"' in small


@pytest.mark.slow
def test_pdf_eps_and_png_figures_become_images_in_the_html(tmp_path, latexmlc):
    write_tex(tmp_path / "paper.tex", FIGURES.replace(" After.", r" \includegraphics{print.pdf} After."))
    (tmp_path / "plot.pdf").write_bytes(pdf_bytes())
    (tmp_path / "print.pdf").write_bytes(pdf_bytes(cmyk=True))  # comes back from Ghostscript as a PAM page
    (tmp_path / "sketch.eps").write_bytes(eps_bytes())
    (tmp_path / "photo.png").write_bytes(png_bytes())
    conversion = convert(tmp_path, "paper.tex", timeout=120)
    html = (conversion.output_dir / "paper.html").read_text()
    assert problems(conversion.log) == [] and conversion.status_code == 0
    sources = re.findall(r'<img src="(?!data:)([^"]+)"', html)  # the footer logo is a data: URL
    assert len(sources) == 4 and "ltx_missing" not in html
    for source in sources:
        image = conversion.output_dir / source
        assert image.is_file() and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", source


@pytest.mark.slow
def test_a_pdf_page_too_big_to_render_loses_its_figure_and_the_conversion_goes_on(tmp_path, latexmlc):
    # 20,000 points a side: at 72 dpi a 400-megapixel page, past the policy's width and area.
    write_tex(tmp_path / "paper.tex", FIGURES.replace(r"\includegraphics{sketch.eps} \includegraphics{photo.png}", ""))
    (tmp_path / "plot.pdf").write_bytes(pdf_bytes(20_000, 20_000))
    conversion = convert(tmp_path, "paper.tex", timeout=240)
    html = (conversion.output_dir / "paper.html").read_text()
    assert conversion.killed is None and conversion.status_code in (1, 2)
    assert "Before." in html and "After." in html and "ltx_missing_image" in html
    messages = parse_log(conversion.log).messages
    assert any("usable image" in m.details or m.category == "imageprocessing" for m in messages)


@pytest.mark.slow
def test_a_postscript_figure_that_loops_forever_ends_its_conversion_at_the_timeout(tmp_path, latexmlc):
    write_tex(tmp_path / "paper.tex", FIGURES.replace("plot.pdf", "loop.eps"))
    (tmp_path / "loop.eps").write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 100\n{ 1 pop } loop\n%%EOF\n")
    (tmp_path / "sketch.eps").write_bytes(eps_bytes())
    (tmp_path / "photo.png").write_bytes(png_bytes())
    started = time.monotonic()
    conversion = convert(tmp_path, "paper.tex", timeout=8)
    assert conversion.killed == "timeout" and conversion.status_code == 3
    assert ("fatal", "timeout", "timedout") in problems(conversion.log)
    assert time.monotonic() - started < 8 + 30
    # The next conversion in the same place is untouched by it.
    write_tex(tmp_path / "next.tex", FIGURES.replace("plot.pdf", "photo.png"))
    assert convert(tmp_path, "next.tex", timeout=120).status_code == 0


def test_the_host_keeps_its_own_policy_and_the_direct_side_can_take_the_sandboxes(tmp_path):
    # What the benchmarks and the fidelity tests call latexmlc "run directly": the host as it is, with the
    # sandbox's ImageMagick policy alone. Without it the host's own policy (Debian's) refuses PDF.
    (tmp_path / "plot.pdf").write_bytes(pdf_bytes())
    convert_command = ["/usr/bin/convert", str(tmp_path / "plot.pdf"), str(tmp_path / "plot.png")]
    refused = subprocess.run(convert_command, capture_output=True, check=False)
    assert refused.returncode != 0 and b"security policy" in refused.stderr
    policy = imagemagick.policy_xml(memory_mb=1024, disk_mb=1024, timeout=60)
    with host_with_policy(policy) as (prefix, descriptors):
        read = subprocess.run([*prefix, *convert_command], pass_fds=descriptors, capture_output=True, check=False)
    assert read.returncode == 0, read.stderr
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
