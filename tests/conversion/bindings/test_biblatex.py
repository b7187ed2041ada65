"""biblatex: citations and the bibliography without LaTeX3's kernel read as raw TeX, from a paper's .bib
(LaTeXML's own BibTeX reading, where it is allowed) or from a biblatex .bbl (the arxiv preset's nobibtex)."""

import re

from tests.conversion.bindings.runs import convert


def _text(html: str) -> str:
    """The HTML's text, tags dropped and spaces joined."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_biblatex_reads_the_bib_files_named_by_addbibresource_where_bibtex_is_allowed():
    outcome = convert("biblatex-bib", preset="default")
    assert outcome.status == "no_problem", outcome.problems()
    text = _text(outcome.html)
    # authoryear: \textcite is "Author (Year)", \parencite "(pre Author Year, post)", linked to the entry
    assert re.search(r'Lovelace \(<a href="#bib\.bib\d+"[^>]*>1843</a>\)', outcome.html)
    assert re.search(r"\(see Babbage <a [^>]*>1864</a>, p\.\s7\)", outcome.html)
    # \parencites: one pair of parentheses, and the space after it kept
    assert re.search(r"\(Lovelace <a [^>]*>1843</a>; Babbage <a [^>]*>1864</a>\)</cite>\s+and", outcome.html)
    assert "Works Cited" in text  # \printbibliography[title=...]
    assert "Passages from the life of a philosopher" in text
    assert "Notes on the analytical engine" in text


def test_biblatex_reads_a_shipped_bbl_under_the_arxiv_preset():
    outcome = convert("biblatex-bbl")
    assert outcome.status == "no_problem", outcome.problems()
    text = _text(outcome.html)
    # numeric, sorting=none: numbers in the .bbl's order, linked to the entries
    assert re.search(r'\[<a href="#bib\.bib1"[^>]*>1</a>\]', outcome.html)
    assert re.search(r'Thomson and Roberts \[<a href="#bib\.bib2"[^>]*>2</a>\]', outcome.html)
    assert re.search(r">1</a>, p\.\s3; <a [^>]*>2</a>, 12\]", outcome.html)  # \cites[p.~3]{a}[12]{b}
    assert "References" in text
    assert "George Howard Darwin." in text
    assert "The Tides and Kindred Phenomena in the Solar System" in text
    assert "In: Nature 23 (1881), pp. 417\u2013419." in text  # \bibrangedash, an en dash
    assert 'href="https://example.org/tides%20book"' in outcome.html  # a \verb field, % and all


def test_without_the_binding_biblatex_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("biblatex-bbl", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "George Howard Darwin" not in outcome.html


def test_biblatex_under_nobibtex_without_a_bbl_gives_an_empty_bibliography_and_no_error():
    outcome = convert("biblatex-bib")  # the arxiv preset: nobibtex, and this fixture ships no .bbl
    assert outcome.status in ("no_problem", "warning"), outcome.problems()
    assert not outcome.problems()
    assert "Cooperative foraging was described by" in outcome.html
    assert "Passages from the life of a philosopher" not in outcome.html
