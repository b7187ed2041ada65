"""Package attribution from log text: conversion/attribution.py on logs written as LaTeXML 0.8.8 writes
them (the lines are copied from its logs of real papers), read through the log parser as the dispatcher
reads them."""

from __future__ import annotations

from conversion.attribution import attribute, evidence_names, located_packages, package_of_path
from conversion.choices import PackageFlag as F
from conversion.logparse import parse_log

BINDINGS = "/usr/share/perl5/LaTeXML/Package"
TEXMF = "/usr/share/texlive/texmf-dist/tex/latex"

PREAMBLE = (
    f"(Loading {BINDINGS}/TeX.pool.ltxml...\n"
    f"(Loading {BINDINGS}/LaTeX.pool.ltxml... 0.10 sec)\n"
    f"(Loading {BINDINGS}/article.cls.ltxml... 0.05 sec)\n"
    f"(Loading {BINDINGS}/amsmath.sty.ltxml...\n"
    f"(Loading {BINDINGS}/keyval.sty.ltxml...\n"
    f"(Processing definitions {TEXMF}/graphics/keyval.sty... 0.05 sec) 0.05 sec)\n"
    f"(Processing definitions {TEXMF}/base/ts1enc.dfu... 0.13 sec) 1.51 sec)\n"
)
MISSING_MINTED = (
    "Warning:missing_file:minted Can't find binding for package minted\n"
    "\tat paper.tex; line 4 col 11 - line 4 col 11\n"
    "\tAnticipate undefined macros or environments\n"
    f"\tIn Core::Definition::Constructor[\\usepac... {BINDINGS}/LaTeX.pool.ltxml; line 879\n"
)
UNDEFINED = (
    "Error:undefined:\\mint The token T_CS[\\mint] is not defined.\n"
    "\tat paper.tex; line 9 col 2 - line 9 col 2\n"
    "\tDefining it now as <ltx:ERROR/>\n"
    "\tIn Core::Gullet[@0x5562] /tmp/x/paper.tex; from line 9 col 3 to line 9 col 3\n"
)
IN_MATHPAR = (
    'Error:unexpected:& Stray alignment "&"\n'
    f"\tat {TEXMF}/mathpartir/mathpartir.sty; line 120 col 4 - line 120 col 5\n"
    f"\tIn Core::Gullet[@0x55] {TEXMF}/mathpartir/mathpartir.sty; from line 120 col 4 to line 120 col 5\n"
)


def uses(log: str) -> dict[tuple[str, str], tuple[int, int]]:
    parsed = parse_log(log)
    return {(u.kind, u.name): (u.flags, u.errors) for u in attribute(parsed.messages, parsed.status)}


def test_loaded_bindings_and_styles_are_packages_and_classes_and_pools_are_not():
    found = uses(PREAMBLE + "Status:conversion:0\n")
    assert found == {
        ("class", "article"): (F.LOADED, 0),
        ("package", "amsmath"): (F.LOADED, 0),
        ("package", "keyval"): (F.LOADED, 0),  # its TeX read by its binding: not raw
    }


def test_a_style_read_without_its_binding_is_raw():
    log = PREAMBLE + f"(Processing definitions {TEXMF}/mdframed/mdframed.sty... 1.2 sec)\nStatus:conversion:0\n"
    assert uses(log)[("package", "mdframed")] == (F.LOADED | F.RAW, 0)


def test_a_missing_binding_is_missing_and_the_only_one_and_undefined_errors_are_weak():
    found = uses(PREAMBLE + MISSING_MINTED + UNDEFINED + "Status:conversion:2\n")
    flags, errors = found[("package", "minted")]
    assert flags == F.MISSING | F.ONLY | F.WEAK | F.CLEARS_WEAK
    assert not flags & F.CLEARS  # weak evidence never clears a paper for certain
    assert errors == 0
    assert evidence_names(flags) == ["missing", "weak"]


def test_a_missing_class_names_the_class_and_two_missing_make_neither_the_only_one():
    log = (
        PREAMBLE + "Warning:missing_file:aa Can't find binding for class aa (using article)\n"
        "\tAnticipate undefined macros or environments\n" + MISSING_MINTED + UNDEFINED + "Status:conversion:2\n"
    )
    found = uses(log)
    assert found[("class", "aa")] == (F.MISSING, 0)
    assert found[("package", "minted")] == (F.MISSING, 0)  # no ONLY, so no weak attribution either


def test_errors_located_in_a_package_clear_the_paper_when_they_are_all_its_errors():
    found = uses(PREAMBLE + f"(Processing definitions {TEXMF}/mathpartir/mathpartir.sty... 0.2 sec)\n"
                 + IN_MATHPAR + IN_MATHPAR + "Status:conversion:2\n")  # fmt: skip
    flags, errors = found[("package", "mathpartir")]
    assert flags == F.LOADED | F.RAW | F.ERROR_IN_DEFINITIONS | F.CLEARS | F.CLEARS_WEAK
    assert errors == 2
    assert not found[("package", "amsmath")][0] & F.CLEARS


def test_too_many_errors_follows_the_errors_it_counts():
    log = PREAMBLE + IN_MATHPAR * 3 + "Fatal:too_many_errors:100 Too many errors (> 100)!\nStatus:conversion:3\n"
    assert uses(log)[("package", "mathpartir")][0] & F.CLEARS
    assert (
        not uses(PREAMBLE + "Fatal:too_many_errors:100 Too many errors\nStatus:conversion:3\n")[("package", "amsmath")][
            0
        ]
        & F.CLEARS_WEAK
    )  # no error of its own: nothing to clear


def test_one_error_elsewhere_keeps_the_paper_from_being_cleared():
    found = uses(PREAMBLE + IN_MATHPAR + UNDEFINED + "Status:conversion:2\n")
    assert found[("package", "mathpartir")] == (F.ERROR_IN_DEFINITIONS, 1)


def test_an_error_free_paper_is_never_cleared_and_a_fatal_without_a_fatal_message_is_not_either():
    assert uses(PREAMBLE + IN_MATHPAR + "Status:conversion:1\n")[("package", "mathpartir")][0] & F.CLEARS == 0
    # A conversion killed at its limit: the verdict is the service's, never a package's.
    killed = IN_MATHPAR + "Fatal:limit:timeout killed after 300 s\nStatus:conversion:3\n"
    assert uses(killed)[("package", "mathpartir")][0] & F.CLEARS == 0
    assert uses(IN_MATHPAR + "Status:conversion:3\n")[("package", "mathpartir")][0] & F.CLEARS == 0


def test_infrastructure_and_missing_file_messages_are_never_located_in_a_package():
    log = (
        f"Fatal:infrastructure:worker_lost the worker died\n\tat {TEXMF}/x/x.sty; line 1 col 1\n"
        f"Error:missing_file:gitstuff Can't find TeX file gitstuff\n\tat {TEXMF}/y/y.sty; line 2 col 1\n"
        "Status:conversion:3\n"
    )
    assert uses(log) == {}


def test_paths_and_locations():
    assert package_of_path(f"{BINDINGS}/revtex4-1.cls.ltxml") == ("class", "revtex4-1", True)
    assert package_of_path(f"{TEXMF}/l3kernel/expl3.sty") == ("package", "expl3", False)
    assert package_of_path(f"{BINDINGS}/LaTeX.pool.ltxml") is None
    assert package_of_path(f"{TEXMF}/base/ts1enc.dfu") is None
    assert package_of_path(".sty") is None
    details = f"at {TEXMF}/a/a.sty; line 3 col 1\n\tIn Core::Definition[\\x] {BINDINGS}/b.cls.ltxml; line 9\n"
    assert located_packages(details) == [("package", "a"), ("class", "b")]
    assert located_packages("Option clash for package foo.sty") == []
