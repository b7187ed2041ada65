"""bussproofs: proof trees built on a stack of math, each inference a fraction of premises over conclusion."""

from tests.conversion.bindings.runs import convert


def test_bussproofs_builds_proof_trees_with_the_binding():
    outcome = convert("bussproofs")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    # \DisplayProof: a binary inference over a unary one and an axiom, with both labels
    assert (
        'alttext="\\displaystyle{\\mbox{Cut}\\;\\frac{\\displaystyle{\\frac{\\displaystyle\\mbox{$\\phi\\vdash\\psi$}}'
        "{\\displaystyle\\mbox{$\\phi,\\chi\\vdash\\psi$}}\\;\\mbox{\\small Weak}}\\qquad\\mbox{$\\chi\\vdash\\chi$}}"
        '{\\displaystyle\\mbox{$\\phi,\\chi\\vdash\\psi\\wedge\\chi$}}}"' in html
    )
    # prooftree: the \Axiom$..$ forms, \noLine (no bar) and a trinary inference, as a display
    assert "\\genfrac{}{}{0.0pt}{}{\\displaystyle{\\displaystyle A\\ \\vdash B}}" in html
    assert "\\qquad\\mbox{C}\\qquad\\mbox{D}}{\\displaystyle\\mbox{E}}" in html
    # the abbreviations
    assert 'alttext="{\\frac{\\displaystyle\\mbox{P}}{\\displaystyle\\mbox{Q}}\\;\\mbox{MP}}"' in html
    assert html.count('display="block"') == 2


def test_without_the_binding_bussproofs_trees_are_not_built():
    outcome = convert("bussproofs", bindings=False, timeout=60)
    assert outcome.status in ("error", "fatal")
    assert "\\frac{\\displaystyle\\mbox{P}}" not in outcome.html
