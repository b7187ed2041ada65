"""The AAS journals' classes (aastex61 ... aastex701): LaTeXML's aastex binding with what AASTeX 6 and 7 add,
instead of LaTeXML's fallback to its generic aastex binding (older AASTeX), where the newer front matter is
undefined or misread and revised text is dropped."""

import re

from tests.conversion.bindings.runs import convert


def authors(html: str) -> str:
    match = re.search(r'<div class="ltx_authors">(.*?)</div>', html, re.S)
    return match.group(1) if match else ""


def test_aastex631_front_matter_table_and_figures_with_the_binding():
    outcome = convert("aastex631")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "Cold Dust in the Brass Orrery" in html
    front = authors(html)
    assert 'href="https://orcid.org/0000-0002-1825-0097"' in front
    # William Herschel's \affiliation belongs to both authors before it.
    assert front.count("Slough Observatory, Berkshire, UK") == 2
    assert "The Orrery Collaboration" in front
    assert "Published April 4, 2024" in html
    assert "ORRERY-2024-01" in html
    # The deluxetable, its note and comments.
    assert "Silicate" in html and "Counted twice." in html and "Sizes in microns." in html
    # Edits keep their final text; \gridline keeps its panels.
    assert "Dust was first seen" in html
    assert "(a) Front" in html and "(b) Back" in html


def test_without_the_binding_aastex631_falls_back_with_errors_and_loses_text():
    outcome = convert("aastex631", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\published", "\\reportnum"} <= undefined
    assert "Dust was first seen" not in outcome.html
    assert "(a) Front" not in outcome.html


def test_aastex7_author_keys_email_and_contribution_with_the_binding():
    outcome = convert("aastex7")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "Faint Comet Tails in the Messier Catalogue" in html
    front = authors(html)
    # \author[ORCID, gname=..., sname=...]: the ORCID alone makes the link.
    assert 'href="https://orcid.org/0000-0002-1825-0097"' in front
    assert "mailto:messier@example.org" in front and "show]" not in html
    assert "The Nebula Survey" in front
    assert "C/1771 G1" in html and "Messier (1771)." in html
    assert "Author contributions" in html


def test_without_the_binding_aastex7_has_errors():
    outcome = convert("aastex7", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\published", "\\suppressAffiliations", "{contribution}"} <= undefined
    assert "show]" in outcome.html
