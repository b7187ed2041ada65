"""agujournal2019: the AGU journals' class, instead of LaTeXML's fallback to its generic class, where the
class's front matter and apacite's citations are undefined and \\authors{...} loses who the authors are."""

import re

from tests.conversion.bindings.runs import convert


def authors(html: str) -> str:
    match = re.search(r'<div class="ltx_authors">(.*?)</div>', html, re.S)
    return match.group(1) if match else ""


def test_agujournal2019_authors_key_points_citations_with_the_binding():
    outcome = convert("agujournal2019")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "Ring Current Decay After Storms" in html
    front = authors(html)
    # \authors{A\affil{1,2}, B\affil{2}, and C\affil{1}}: three authors with their affiliations.
    assert front.count("ltx_personname") == 3
    assert "Caroline Herschel" in front and "and Caroline" not in front
    assert front.count("Analytical Engine Laboratory") == 2 and front.count("Royal Institution") == 2
    assert 'href="mailto:ada@example.org"' in html
    assert "JGR: Space Physics" in html
    assert "Key Points" in html and "Charge exchange dominates the slow phase." in html
    assert "Plain Language Summary" in html and "Space storms fade slowly." in html
    # apacite's \citeA and \cite<prefix>[suffix]{key} as author-year citations.
    assert re.search(r'ltx_citemacro_citet">Dessler\W+amp;\W+Parker \(<a [^>]*>1959</a>\)', html)
    assert re.search(r'ltx_citemacro_citep">\(e\.g\., Dessler\W+amp;\W+Parker, <a [^>]*>1959</a>, p\.\W3\)', html)
    assert "Hydromagnetic theory of geomagnetic storms" in html and "2239" in html
    assert "ltx_acknowledgements" in html and "We thank the observatory staff." in html
    # The shipped trackchanges: the revised text.
    assert "The current decays quickly and then slowly." in html


def test_without_the_binding_agujournal2019_has_undefined_commands():
    outcome = convert("agujournal2019", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\journalname", "\\correspondingauthor", "{keypoints}", "\\citeA"} <= undefined
