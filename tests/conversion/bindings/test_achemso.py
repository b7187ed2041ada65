"""achemso: the ACS journals' class, its authors' affiliations, notes and contacts, and its floats."""

from tests.conversion.bindings.runs import convert


def test_achemso_front_matter_converts_with_the_binding():
    outcome = convert("achemso")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "equal contribution" in html and "Department of Chemistry, Stanford University" in html
    assert "pande@example.org" in html and "one-shot learning" in html
    assert "Scheme 1" in html and "Acknowledgement" in html


def test_without_the_binding_altaffiliation_is_undefined():
    outcome = convert("achemso", bindings=False, timeout=60)
    assert outcome.status in ("error", "fatal")
    assert ("undefined", "\\altaffiliation") in {(c, w) for _s, c, w, _d in outcome.problems()}
