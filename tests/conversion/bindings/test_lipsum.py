"""lipsum: Lorem Ipsum paragraphs from the package's own text, without LaTeX3's kernel read as raw TeX."""

from tests.conversion.bindings.runs import convert


def test_lipsum_paragraphs_and_sentences_with_the_binding():
    outcome = convert("lipsum")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "First: Lorem ipsum dolor sit amet, consectetuer adipiscing elit." in html  # \lipsum[1]
    assert "Star: Nam dui ligula, fringilla a, euismod sodales" in html  # \lipsum*[2]
    assert "Sentences: Ut purus elit, vestibulum ut, placerat ac, adipiscing vitae, felis. Curabitur dictum" in html
    assert "Quisque ullamcorper placerat ipsum." in html  # paragraph 4 of \lipsum[3-4]
    assert "luctus mauris. end of star." in html  # \lipsum* keeps the space after it


def test_without_the_binding_lipsum_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("lipsum", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "Lorem ipsum" not in outcome.html
