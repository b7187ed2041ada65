"""aligned-overset: \\overset{..}&{=} aligns on the relation, with amsmath's \\overset and without LaTeX3's
kernel read as raw TeX."""

import re

from tests.conversion.bindings.runs import convert

# An empty left cell, then the stacked relation and the rest of the line in the right-hand cell.
EMPTY_THEN = (
    r'<td class="ltx_td ltx_eqn_cell"></td>\s*<td class="ltx_td ltx_align_left ltx_eqn_cell">'
    r'<math [^>]*alttext="'
)


def test_overset_and_underset_take_the_alignment_point_with_the_binding():
    outcome = convert("aligned-overset")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert re.search(EMPTY_THEN + re.escape(r"\displaystyle\overset{\text{(i)}}{=}d+e") + '"', html)
    assert re.search(EMPTY_THEN + re.escape(r"\displaystyle\underset{\text{(ii)}}{\leq}f") + '"', html)
    assert 'alttext="x\\overset{!}{=}y"' in html  # \overset without an & is amsmath's


def test_without_the_binding_aligned_overset_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("aligned-overset", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "overset" not in outcome.html
