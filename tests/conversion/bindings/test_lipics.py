"""lipics-v2021 and lipics-v2019 (which loads it): the LIPIcs class's front matter (authors with affiliation, email
and ORCID, copyright, ACM classification, keywords), its series data kept out of the text, and its theorem-like
environments."""

import pytest

from tests.conversion.bindings.runs import convert


@pytest.mark.parametrize("fixture", ["lipics", "lipics-v2019"])
def test_lipics_front_matter_and_theorems_convert_with_the_binding(fixture):
    outcome = convert(fixture)
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "Ada Lovelace" in html and "Analytical Engines Ltd, London" in html and "ada@example.org" in html
    assert "https://orcid.org/0000-0002-1825-0097" in html and "Funded by a grant." in html
    assert "Program verification" in html and "separation logic" in html
    assert "Lemma 1" in html and "Claim 2" in html
    assert "Reykjavik" not in html and "ITP 2025" not in html


@pytest.mark.parametrize("fixture", ["lipics", "lipics-v2019"])
def test_without_the_binding_the_lipics_commands_are_undefined(fixture):
    outcome = convert(fixture, bindings=False, timeout=60)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\Copyright", "\\ccsdesc", "\\EventEditors"} <= undefined, undefined
