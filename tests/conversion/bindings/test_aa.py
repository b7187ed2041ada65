"""aa: LaTeXML's own Astronomy & Astrophysics binding, loaded from LaTeXML's installation, with the table
references, table notes and online-only material it lacks."""

import re

from tests.conversion.bindings.runs import convert


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_aa_table_notes_references_and_online_figure_with_the_binding():
    outcome = convert("aa")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    # LaTeXML's own binding is still there: the institutes and the keywords.
    assert "Harvard College Observatory" in html and "stars: abundances" in html
    plain = text(html)
    assert "Notes. ( a ) Upper limit." in plain
    assert "References. (1) Payne (1925); (2) Leavitt (1912)." in plain
    assert "An online-only figure." in html
    assert "\\tablebib" not in html


def test_without_the_binding_tablebib_and_onlfig_are_undefined():
    outcome = convert("aa", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\tablebib", "\\onlfig"} <= undefined
