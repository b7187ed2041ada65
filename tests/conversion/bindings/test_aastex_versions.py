"""Each AAS class version of conversion/bindings (aastex61, 62, 63, 701; 631 and 7 in test_aastex.py): LaTeXML's
aastex binding with aastex6_support and lx_affiliationgroups, the version's own name found on the path."""

import pytest

from tests.conversion.bindings.runs import convert

VERSIONS = ("aastex61", "aastex62", "aastex63", "aastex701")


@pytest.mark.parametrize("version", VERSIONS)
def test_each_aas_class_version_has_its_front_matter(version):
    outcome = convert(version)
    assert outcome.status == "no_problem", outcome.problems()
    assert "ORRERY-2024-01" in outcome.html and "Slough Observatory, Berkshire, UK" in outcome.html
    assert "https://orcid.org/0000-0002-1825-0097" in outcome.html


@pytest.mark.parametrize("version", VERSIONS)
def test_without_the_bindings_the_version_lacks_the_6x_commands(version):
    outcome = convert(version, bindings=False, timeout=60)
    assert outcome.status == "error"
    assert ("undefined", "\\reportnum") in {(c, w) for _s, c, w, _d in outcome.problems()}
