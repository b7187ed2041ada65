"""revtex4-2: LaTeXML's REVTeX 4.1 binding with what 4.2 adds, instead of LaTeXML's fallback to its
REVTeX 3 binding for the name revtex4-2."""

import re

from tests.conversion.bindings.runs import convert


def authors(html: str) -> str:
    match = re.search(r'<div class="ltx_authors">(.*?)</div>', html, re.S)
    return match.group(1) if match else ""


def test_revtex4_2_front_matter_video_and_bibliography_with_the_binding():
    outcome = convert("revtex4-2")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "Spin Waves in a Difference Engine" in html
    front = authors(html)
    assert "Ada Lovelace" in front and "Charles Babbage" in front
    assert "Also at Royal Society, London" in front and "Also at ]" not in html
    assert "The Difference Collaboration" in front
    assert "mailto:ada@example.org" in front
    # The table in {ruledtabular}, the {video} float, numbered citations and an apsrev4-2 entry.
    assert "Iron cog" in html
    assert re.search(r"Video\s1\s*</span>The engine turning.", html)
    assert re.search(r'\[<a href="#bib.bib1"[^>]*>1</a>', html)
    assert "Sketch of the analytical engine" in html and "\\bibfield" not in html


def test_without_the_binding_revtex4_2_is_read_as_revtex_3_with_errors():
    outcome = convert("revtex4-2", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"{video}", "\\bibfield"} <= undefined
    assert "Also at ]" in outcome.html
