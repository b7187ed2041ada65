"""mathtools: LaTeXML's own binding, and TeX's \\nonscript, which its paired delimiters' manual uses."""

from tests.conversion.bindings.runs import convert


def test_mathtools_paired_delimiters_with_nonscript_convert():
    outcome = convert("mathtools")
    assert outcome.status == "no_problem", outcome.problems()
    assert "≔" in outcome.html  # \coloneqq: LaTeXML's mathtools binding is loaded under ours
    assert 'alttext="\\{x\\;|\\allowbreak\\;\\mathopen{}x&gt;0\\}"' in outcome.html  # \nonscript: nothing


def test_without_the_binding_nonscript_is_undefined():
    outcome = convert("mathtools", bindings=False, timeout=60)
    assert outcome.status == "error"
    assert ("undefined", "\\nonscript") in {(category, what) for _s, category, what, _d in outcome.problems()}
