"""jmlr2e: the Journal of Machine Learning Research's package, instead of the package read as raw TeX,
where the author block's \\name, \\email, \\addr and \\AND are undefined and the authors run together."""

import re

from tests.conversion.bindings.runs import convert


def authors(html: str) -> str:
    match = re.search(r'<div class="ltx_authors">(.*?)</div>', html, re.S)
    return match.group(1) if match else ""


def test_jmlr2e_authors_keywords_and_acknowledgments_with_the_binding():
    outcome = convert("jmlr2e")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    front = authors(html)
    assert front.count("ltx_personname") == 2
    assert 'href="mailto:hopper@example.org"' in front and 'href="mailto:turing@example.org"' in front
    assert "Department of Computing, Harvard University, Cambridge, MA" in front
    assert "Computing Laboratory, University of Manchester, UK" in front
    assert "Submitted 3/26" in html and "Ada Lovelace" in html
    assert "compilers, learning" in html and "ltx_keywords" in html
    assert "Every compiler halts on its own source." in html and "ltx_theorem" in html
    assert "ltx_acknowledgements" in html and "We thank the night shift." in html


def test_without_the_binding_jmlr2e_is_missing_and_its_commands_undefined():
    outcome = convert("jmlr2e", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\name", "\\addr", "\\AND", "\\acks"} <= undefined
