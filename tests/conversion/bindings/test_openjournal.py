"""openjournal: the Open Journal of Astrophysics' class (emulateapj renamed) as LaTeXML's emulateapj binding,
instead of LaTeXML's fallback to its generic class, where deluxetable's notes and the class's macros are
undefined."""

import re

from tests.conversion.bindings.runs import convert


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_openjournal_front_matter_and_deluxetable_with_the_binding():
    outcome = convert("openjournal")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "A Continuous Autoregressive Model of Quasar Variability" in html
    assert "Warner Observatory" in html and "swift@example.org" in html
    plain = text(html)
    # emulateapj's look: "Subject headings", numbered sections "1.", the table note.
    assert "Subject headings: methods: statistical" in plain
    assert "Note. — Medians of the posterior." in plain
    assert "about \u00bd a year" in plain
    assert "3C 273" in html


def test_without_the_binding_openjournal_has_undefined_commands():
    outcome = convert("openjournal", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert "\\onehalf" in undefined
