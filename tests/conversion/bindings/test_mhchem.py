"""mhchem: \\ce and \\pu read in Perl and written as math, instead of mhchem 4's LaTeX3 code."""

from tests.conversion.bindings.runs import convert


def test_mhchem_writes_formulae_and_equations_with_the_binding():
    outcome = convert("mhchem")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert 'alttext="\\mathrm{H}_{2}\\mathrm{O}"' in html
    assert 'alttext="\\mathrm{S}\\mathrm{O}_{4}^{2{-}}"' in html  # charge by ^
    assert 'alttext="\\mathrm{N}\\mathrm{O}_{3}^{{-}}"' in html  # count, then a final charge
    assert 'alttext="\\mathrm{Fe}^{3+}"' in html
    assert 'alttext="2\\,\\mathrm{H}_{2}+\\mathrm{O}_{2}\\rightarrow 2\\,\\mathrm{H}_{2}\\mathrm{O}"' in html
    assert "\\mathrm{(aq)}\\rightleftharpoons\\mathrm{Na}^{+}+\\mathrm{Cl}^{{-}}" in html
    assert "\\cdot 5\\mathrm{H}_{2}\\mathrm{O}\\xrightarrow[]{\\Delta}" in html and "\\uparrow" in html
    assert "{=}" in html and "{\\equiv}" in html and "{\\alpha}{-}\\mathrm{Fe}" in html
    assert 'alttext="-285.8\\,\\mathrm{kJ}\\,\\mathrm{mol}^{-1}"' in html
    assert ">)(</span>" in html  # not understood: upright text


def test_without_the_binding_mhchem_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("mhchem", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "\\mathrm{H}_{2}\\mathrm{O}" not in outcome.html
