"""Font packages of TeX Live's fonts-extra collection, which workers do not install: accepted with their
options, so that a paper naming one converts without the missing file's error."""

from tests.conversion.bindings.runs import convert

FONTS = ("cfr-lm", "kpfonts", "inconsolata", "stix2")


def test_font_packages_are_accepted_with_their_options_and_keep_the_ams_symbols():
    outcome = convert("fonts")
    assert outcome.status == "no_problem", outcome.problems()
    assert "Fonts are the reader" in outcome.html and "⊆" in outcome.html and "≲" in outcome.html


def test_without_the_bindings_each_font_package_is_a_missing_file():
    outcome = convert("fonts", bindings=False, timeout=60)
    assert outcome.status == "error"
    assert set(FONTS) <= outcome.missing(), outcome.missing()
