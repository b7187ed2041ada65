"""mathpartir: inference rules as math fractions and rows of them, instead of mathpartir's measured boxes."""

from tests.conversion.bindings.runs import convert


def test_mathpartir_sets_rules_as_fractions_with_the_binding():
    outcome = convert("mathpartir")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    # an inline rule: premises side by side over the conclusion
    assert 'alttext="{\\frac{\\displaystyle A\\qquad B}{\\displaystyle A\\wedge B}}"' in html
    # the mathpar rows: a named rule, an axiom with a right label and no bar, \and, \\ and \infer
    assert "AndIntro" in html and "Ax" in html
    assert (
        "\\frac{\\displaystyle\\Gamma\\vdash A\\qquad\\Gamma\\vdash B}{\\displaystyle\\Gamma\\vdash A\\wedge B}" in html
    )
    assert "{\\displaystyle\\Gamma,A\\vdash A\\;" in html
    assert html.count('display="block"') == 2  # the two rows of the mathpar


def test_without_the_binding_mathpartir_rules_are_not_fractions():
    outcome = convert("mathpartir", bindings=False, timeout=60)
    assert outcome.status == "error"
    assert "\\inferrule" in {what for _severity, _category, what, _details in outcome.problems()}
    assert "\\frac{\\displaystyle A\\qquad B}" not in outcome.html
