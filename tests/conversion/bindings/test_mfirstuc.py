"""mfirstuc, and glossaries which loads it: first letters made upper case without LaTeX3's kernel read as
raw TeX (mfirstuc 2.08 and glossaries 4.52 are partly LaTeX3 code)."""

from tests.conversion.bindings.runs import convert


def test_mfirstuc_and_glossaries_capitalise_with_the_bindings():
    outcome = convert("mfirstuc")
    assert outcome.status in ("no_problem", "warning"), outcome.problems()
    html = outcome.html
    assert "Hello there." in html  # \makefirstuc
    assert "Word</em> here." in html  # into a leading \emph{...}
    assert "Apple pie." in html  # \xmakefirstuc of a macro
    assert "Æon." in html  # \ae
    assert "The Wind in the Willows." in html  # \capitalisewords with \MFUnocap
    assert "Big Red</span> Dog." in html  # \capitalisefmtwords
    assert "Well-Known Facts." in html  # \MFUhyphentrue
    assert "Lemon</span> juice" in html and "lemon</span> tart" in html  # glossaries' \Gls and \gls


def test_without_the_bindings_glossaries_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("mfirstuc", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "Wind in the Willows" not in outcome.html
