"""copernicus: the Copernicus journals' class (GMD, HESS, ACP, ...), instead of LaTeXML's fallback to its
generic class, where the class's front matter, statements, units and table rules are undefined."""

import re

from tests.conversion.bindings.runs import convert


def authors(html: str) -> str:
    match = re.search(r'<div class="ltx_authors">(.*?)</div>', html, re.S)
    return match.group(1) if match else ""


def test_copernicus_front_matter_statements_and_tables_with_the_binding():
    outcome = convert("copernicus")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "A Tide Model for the Wadden Sea" in html
    front = authors(html)
    # \Author[marks]{given}{surname} with \affil[mark]{...}: each author gets the affiliations marked.
    assert "Anna Aman" in front and "Bert Bman" in front
    assert front.count("Institute of Coastal Research") == 1
    assert "now at: Harbour Office" in front
    assert "bman@example.org" in front
    assert "Anna Aman (aman@example.org)" in html
    assert "3 March 2026" in html
    assert re.search(r"ltx_title_section\">\s*<span class=\"ltx_tag ltx_tag_section\">1 </span>Introduction", html)
    assert re.search(r"<span class=\"ltx_tag ltx_tag_section\">3 </span>Conclusions", html)
    assert "Measured at high tide." in html
    assert "(R1)" in html
    assert "Table A1" in html
    for title in ("Code availability", "Author contributions", "Competing interests"):
        assert f">{title}</h" in html
    assert "We thank the harbour pilots." in html and "ltx_acknowledgements" in html


def test_without_the_binding_copernicus_has_undefined_commands():
    outcome = convert("copernicus", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\Author", "\\correspondence", "\\introduction", "\\unit", "\\tophline"} <= undefined
    assert "Table A1" not in outcome.html
