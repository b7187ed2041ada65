"""xparse: document commands and environments from an argument specification, without LaTeX3's kernel
read as raw TeX."""

from tests.conversion.bindings.runs import convert


def test_xparse_commands_and_environments_take_their_arguments_with_the_binding():
    outcome = convert("xparse")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "Hello, world." in html  # s absent, O default, o absent: -NoValue-
    assert "Loudly Goodbye, friend and colleague." in html  # s, O given, trailing o given
    assert "[zero/one/minus]" in html and "[two/three/plus]" in html  # D, r, t
    assert "x up a down b" in html and "y down c" in html  # e{^_}
    assert "(alpha)(beta)(gamma)" in html  # >{\SplitList{;}} and \ProcessList
    assert "Empty Full" in html  # \IfBlankTF, \RenewDocumentCommand, \ProvideDocumentCommand left it
    assert "verb:a-b#c" in html  # v
    assert "abab" in html  # \NewExpandableDocumentCommand
    assert "Begin Box inner:text:End Box inner" in html  # environment, end code sees the arguments
    assert "Body(some words)Done" in html  # b
    assert "-NoValue-" not in html


def test_without_the_binding_xparse_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("xparse", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "Loudly Goodbye" not in outcome.html
