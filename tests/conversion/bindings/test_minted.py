"""minted: code read verbatim and set as LaTeXML's listings sets it, with no Pygments and no shell."""

import re

from tests.conversion.bindings.runs import convert


def test_minted_sets_every_form_of_code_as_a_listing():
    outcome = convert("minted")
    assert outcome.status == "no_problem", outcome.problems()
    html = re.sub(r' id="[^"]*"', "", outcome.html)  # the arxiv preset gives every token an id
    # the environment, with escapeinside from \setminted[haskell] and the language as a class
    assert "ltx_minted_language_haskell" in html
    assert '<span class="ltx_text ltx_font_sansserif">forall</span>' in html
    assert "putStrLn" in html
    # \mintinline with braces (balanced) and with a delimiter; \hs through \newcommand; \newmintinline
    assert ">let</span>" in html and "{<span" in html
    assert "ltx_minted_language_c" in html
    assert "ltx_minted_language_julia" in html and "push" in html
    # \newminted's environment, with its line numbers; \newmint; autogobble
    assert "ltx_tag_listingline" in html and "square" in html
    assert "answer" in html
    assert '<span class="ltx_text ltx_lst_identifier">Lemma</span>' in html
    assert '<span class="ltx_text ltx_lst_space">    </span><span class="ltx_text ltx_lst_identifier">Lemma' not in html
    # the listing float, its caption, its reference and \listoflistings
    assert "Listing 1: " in html
    assert "List of Listings" in html
    # \mintinline in a formula is text there
    assert re.search(r'<mtext class="[^"]*ltx_minted_language_haskell[^"]*"[^>]*>getValue</mtext>', html)


def test_without_the_binding_minted_cannot_run_pygments():
    outcome = convert("minted", bindings=False, timeout=60)
    assert outcome.status in ("error", "fatal")
    assert "ltx_minted_language_haskell" not in outcome.html
