"""siunitx: LaTeXML's own siunitx binding, loaded without the LaTeX3 kernel it asks for and does not use."""

from tests.conversion.bindings.runs import convert


def test_siunitx_numbers_units_and_s_columns_convert_with_the_binding():
    outcome = convert("siunitx")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert 'alttext="12.5\\text{\\,}\\mathrm{kg}"' in html  # \SI
    assert 'alttext="\\mathrm{N}\\text{\\,}\\mathrm{m}"' in html  # \si
    assert 'alttext="123\\,456.789"' in html  # \num groups digits
    assert "\\mathrm{\\SIUnitSymbolCelsius}20" in html  # \SIrange
    assert 'alttext="4\\text{\\,}\\mathrm{GiB}"' in html  # the binary-units option
    assert 'alttext="12.5"' in html and "ltx_tabular" in html  # the S column


def test_without_the_binding_siunitx_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("siunitx", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "SIUnitSymbolCelsius" not in outcome.html
