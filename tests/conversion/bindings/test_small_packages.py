"""Small bindings whose package or class left one command undefined in a real paper: jfp1's \\shortcite and
\\email, orcidlink's \\orcidlink, tensind's \\tensordelimiter and \\tensor."""

import pytest

from tests.conversion.bindings.runs import convert


def test_jfp1_cites_short_and_keeps_the_authors_email():
    outcome = convert("jfp1")
    assert outcome.status == "no_problem", outcome.problems()
    assert "andrey@example.org" in outcome.html and "Newcastle University" in outcome.html
    assert outcome.html.count("Acar 2007</a>]</cite>") == 2  # \shortcite and \cite both cite the entry


def test_orcidlink_links_the_identifier():
    outcome = convert("orcidlink")
    assert outcome.status == "no_problem", outcome.problems()
    assert 'href="https://orcid.org/0000-0002-1825-0097"' in outcome.html


def test_tensind_sets_the_indices_as_scripts():
    outcome = convert("tensind")
    assert outcome.status == "no_problem", outcome.problems()
    assert 'alttext="{R}^{a}_{bcd}"' in outcome.html and "<msubsup " in outcome.html


@pytest.mark.parametrize(("fixture", "undefined"), [
    ("jfp1", "\\shortcite"), ("orcidlink", "\\orcidlink"), ("tensind", "\\tensordelimiter"),
])  # fmt: skip
def test_without_the_bindings_the_command_is_undefined(fixture, undefined):
    outcome = convert(fixture, bindings=False, timeout=60)
    assert outcome.status in ("error", "fatal")
    assert undefined in {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
