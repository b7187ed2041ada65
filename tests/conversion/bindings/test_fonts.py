"""Every font package of TeX Live's fonts-extra collection (not installed) that conversion/bindings binds:
accepted with its options, so that a paper naming one converts without the missing file's error."""

from conversion.profiles import BINDINGS_DIR
from tests.conversion.bindings.runs import convert

FONTS = (
    "XCharter",
    "beramono",
    "cfr-lm",
    "cochineal",
    "crimson",
    "ebgaramond",
    "erewhon",
    "fouriernc",
    "garamondx",
    "heuristica",
    "inconsolata",
    "kpfonts",
    "lato",
    "libertine",
    "libertinus",
    "mathdesign",
    "mlmodern",
    "newpxmath",
    "newpxtext",
    "opensans",
    "roboto",
    "sourcecodepro",
    "sourcesanspro",
    "stix",
    "stix2",
    "tgheros",
    "tgpagella",
    "tgtermes",
)


def test_font_packages_are_accepted_with_their_options_and_keep_the_ams_symbols():
    outcome = convert("fonts")
    assert outcome.status == "no_problem", outcome.problems()
    assert "Fonts are the reader" in outcome.html and "⊆" in outcome.html and "≲" in outcome.html


def test_without_the_bindings_each_font_package_is_a_missing_file():
    outcome = convert("fonts", bindings=False, timeout=60)
    assert outcome.status == "error"
    assert set(FONTS) <= outcome.missing(), outcome.missing()


def test_the_fixture_names_every_font_binding():
    bound = {path.name.removesuffix(".sty.ltxml") for path in BINDINGS_DIR.glob("*.sty.ltxml")
             if "fonts-extra collection (not installed)" in path.read_text()}  # fmt: skip
    assert bound == set(FONTS)
