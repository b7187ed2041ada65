"""xpatch: etoolbox's patches, for robust commands too, without LaTeX3's kernel read as raw TeX."""

from tests.conversion.bindings.runs import convert


def test_xpatch_patches_a_command_with_the_binding():
    outcome = convert("xpatch")
    assert outcome.status == "no_problem", outcome.problems()
    assert "Goodbye world, friend." in outcome.html


def test_without_the_binding_xpatch_reads_latex3s_kernel_past_any_short_limit():
    outcome = convert("xpatch", bindings=False, timeout=15)
    assert outcome.status == "fatal"
    assert "Goodbye world" not in outcome.html
