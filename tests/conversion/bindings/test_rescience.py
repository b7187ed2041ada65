"""rescience: the ReScience C class, instead of LaTeXML's fallback to its generic class, where the packages
the class loads (amsmath, hyperref, ...) are missing and its metadata.tex (title, authors) is not read."""

import re

from tests.conversion.bindings.runs import convert


def authors(html: str) -> str:
    match = re.search(r'<div class="ltx_authors">(.*?)</div>', html, re.S)
    return match.group(1) if match else ""


def test_rescience_metadata_and_the_class_packages_with_the_binding():
    outcome = convert("rescience", timeout=180)
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "[Re] Predator\u2013Prey Cycles Revisited" in html
    assert "Replication / Ecology" in html
    front = authors(html)
    assert "Vito Volterra" in front and "University of Rome, Italy" in front
    assert "Johns Hopkins University" in front
    assert 'href="https://orcid.org/0000-0002-1825-0097"' in html
    assert "ltx_equationgroup" in html or "ltx_eqn_align" in html
    assert 'href="https://example.org/lv"' in html


def test_without_the_binding_rescience_has_undefined_commands_and_no_title():
    outcome = convert("rescience", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\text", "\\dfrac", "\\url", "\\autoref"} <= undefined
    assert "Predator" not in outcome.html
