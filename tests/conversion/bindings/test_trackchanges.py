"""trackchanges: editors' marked changes read as the revised text, instead of undefined commands (or, with
the package shipped and read raw, morefloats' undefined \\extrafloats and a marked-up draft)."""

from tests.conversion.bindings.runs import convert


def test_trackchanges_shows_the_revised_text_with_the_binding():
    outcome = convert("trackchanges")
    assert outcome.status == "no_problem", outcome.problems()
    html = outcome.html
    assert "The comet returned in 1758, as" in html
    assert "Halley predicted." in html
    assert "Its period is well known." in html
    for dropped in ("never returned", "nobody", "Cite Halley", "roughly 76 years", "orbit"):
        assert dropped not in html


def test_without_the_binding_trackchanges_commands_are_undefined():
    outcome = convert("trackchanges", bindings=False)
    assert outcome.status == "error"
    undefined = {what for _severity, category, what, _details in outcome.problems() if category == "undefined"}
    assert {"\\add", "\\remove", "\\change"} <= undefined
