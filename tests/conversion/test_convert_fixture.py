"""The /convert fixture (tests/fixtures/convert: formulas and fragments of real papers with the answers a
cold latexmlc gives them, made by bench/make_convert_fixture.py): its shape, the normaliser it is kept in,
and a sample of it against a live cold conversion, so that what another engine is held to is what latexmlc
answers here."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from conversion import sandbox
from conversion.engine import convert_text, engine_version, latexmlc_path
from tests.conversion.convert_answers import ADDRESS_PLACEHOLDER, ID_PLACEHOLDER, normalised

# The input as a conversion's log names it: its file in the sandbox's working directory.
INPUT = sandbox.INSIDE_WORK / "input.tex"

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "convert"
REGENERATE = ".venv/bin/python bench/make_convert_fixture.py"
PAGE_CHARS = 3000
SAMPLE_FORMULAS = 8
SAMPLE_FRAGMENTS = 2
ANSWER_KEYS = {"result", "status", "status_code", "messages"}
# What a normalised answer must not hold: a duration, a date, a measure, an object's address.
RUN_SPECIFIC = re.compile(r"[0-9]\.[0-9]{2} sec\)|processing (?:started|finished)|runtime_ms|cpu_ms|0x[0-9a-f]{4}")


@cache
def fixture(name: str) -> dict:
    return json.loads((FIXTURE / f"{name}.json").read_text(encoding="utf-8"))


def has_errors(item: dict) -> bool:
    return item["answer"]["status_code"] >= 2


def sample(items: list[dict], count: int) -> list[dict]:
    """`count` items spread evenly over the list, the last one replaced by the first with errors when none
    of them has any, and the first by the first of a page when fragments have none of a page."""
    chosen = [items[number * len(items) // count] for number in range(count)]
    if not any(has_errors(item) for item in chosen):
        chosen[-1] = next(item for item in items if has_errors(item))
    pages = [item for item in items if item["kind"] == "page"]
    if pages and not any(item["kind"] == "page" for item in chosen):
        chosen[0] = pages[0]
    return chosen


@pytest.fixture
def latexmlc() -> str:
    # Raises EngineMissing ("... apt-get install latexml") instead of skipping.
    return latexmlc_path()


def test_the_fixture_holds_enough_formulas_and_fragments_with_unique_ids():
    formulas, fragments = fixture("formulas")["items"], fixture("fragments")["items"]
    assert len(formulas) >= 200 and len(fragments) >= 20
    items = formulas + fragments
    assert len({item["id"] for item in items}) == len(items)
    assert len({item["tex"] for item in formulas}) == len(formulas)
    assert len({item["paper"] for item in formulas}) >= 30
    assert sum(len(item["tex"]) >= PAGE_CHARS for item in fragments) >= 3
    assert all(set(item) >= {"id", "paper", "tex", "answer"} for item in items)
    assert all(set(item["answer"]) == ANSWER_KEYS for item in items)


def test_both_files_say_the_latexml_version_and_request_they_were_made_with():
    formulas, fragments = fixture("formulas"), fixture("fragments")
    assert formulas["latexml_version"] == fragments["latexml_version"]
    assert formulas["latexml_version"].startswith("latexmlc (LaTeXML version ")
    assert (formulas["request"]["whatsin"], formulas["request"]["pmml"]) == ("math", True)
    assert fragments["request"]["whatsin"] == "fragment" and "pmml" not in fragments["request"]


def test_some_stored_answers_carry_errors_and_most_formulas_do_not():
    formulas, fragments = fixture("formulas")["items"], fixture("fragments")["items"]
    assert 0.10 <= sum(has_errors(item) for item in formulas) / len(formulas) <= 0.20
    assert any(has_errors(item) for item in fragments)
    assert any(not has_errors(item) for item in fragments)


def test_the_stored_answers_hold_nothing_of_the_run_that_made_them():
    for item in fixture("formulas")["items"] + fixture("fragments")["items"]:
        answer = item["answer"]
        texts = [answer["result"], *(part for message in answer["messages"] for part in message)]
        assert [text for text in texts if RUN_SPECIFIC.search(text)] == [], item["id"]
        assert all(message[1] != "loaded_file" for message in answer["messages"]), item["id"]
        assert set(re.findall(r'(?<![\w:-])(?:xml:id|id|fragid)="([^"]*)"', answer["result"])) <= {ID_PLACEHOLDER}


def test_normalised_keeps_the_messages_and_leaves_out_timing_loads_ids_addresses_and_hash_orders():
    log = (
        "(Loading /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml... 0.09 sec)\n"
        "latexmlc (LaTeXML version 0.8.8)\n"
        "processing started Sat Nov 28 18:07:48 2026\n"
        "(Digesting TeX input...\n"
        "Error:undefined:\\foo The token T_CS[\\foo] is not defined.\n"
        "\tat input.tex; line 1 col 12 - line 1 col 12\n"
        f"\tIn Core::Gullet[@0x562fd55b8418] {INPUT}; from line 1 col 14 to line 1 col 14\n"
        " 0.27 sec)\n"
        "Error:malformed:ltx:XMApp <ltx:XMApp> isn't allowed in <ltx:p>\n"
        '\tCurrently in XMLDocument[94763467376560]<ltx:para _box="LaTeXML::Core::List=HASH(0x562..." xml:id="p1">\n'
        "Warning:uninitialized:value Use of uninitialized value value in string eq\n"
        "\tat at /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml line 5998, <$IN> line 2\n"
        "Warning:uninitialized:value Use of uninitialized value value in string eq\n"
        "\tat at /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml line 5995, <$IN> line 2\n"
        "Warning:expected:ids Missing Entry for citation: Chazal.2009,Bauer.2015\n"
        "\tIn Post::CrossRef[@0x55d0c3a1b2c8] ->process\n"
        "processing finished Sat Nov 28 18:07:49 2026\n"
        "Status:conversion:2\n"
        "Info:runtime_ms:870\n"
        "Info:cpu_ms:856\n"
    )
    answer = {"result": '\n<p id="p1.m1" data-id="k">x</p>\n', "log": log, "status": "error", "status_code": 2}
    assert normalised(answer) == {
        "result": f'<p id="{ID_PLACEHOLDER}" data-id="k">x</p>',
        "status": "error",
        "status_code": 2,
        "messages": [
            ["error", "undefined", "\\foo", "The token T_CS[\\foo] is not defined.\n"
             "at input.tex; line 1 col 12 - line 1 col 12\n"
             f"In Core::Gullet[@{ADDRESS_PLACEHOLDER}] {INPUT}; from line 1 col 14 to line 1 col 14"],
            ["error", "malformed", "ltx:XMApp", "<ltx:XMApp> isn't allowed in <ltx:p>\n"
             f'Currently in XMLDocument[{ADDRESS_PLACEHOLDER}]<ltx:para'
             f' _box="LaTeXML::Core::List=HASH({ADDRESS_PLACEHOLDER}..." xml:id="{ID_PLACEHOLDER}">'],
            ["warning", "uninitialized", "value", "Use of uninitialized value value in string eq\n"
             "at at /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml line 5995, <$IN> line 2"],
            ["warning", "uninitialized", "value", "Use of uninitialized value value in string eq\n"
             "at at /usr/share/perl5/LaTeXML/Package/TeX.pool.ltxml line 5998, <$IN> line 2"],
            ["warning", "expected", "ids", "Missing Entry for citation: Bauer.2015,Chazal.2009\n"
             f"In Post::CrossRef[@{ADDRESS_PLACEHOLDER}] ->process"],
        ],
    }  # fmt: skip


@pytest.mark.slow
def test_a_live_cold_conversion_answers_as_the_fixture_keeps(latexmlc):
    version = engine_version(latexmlc)
    for name in ("formulas", "fragments"):
        made_with = fixture(name)["latexml_version"]
        if made_with != version:
            pytest.fail(
                f"tests/fixtures/convert/{name}.json was made with {made_with!r}, and this machine has {version!r}:"
                f" regenerate the fixture with {REGENERATE}"
            )
    chosen = [(fixture("formulas")["request"], item) for item in sample(fixture("formulas")["items"], SAMPLE_FORMULAS)]
    chosen += [
        (fixture("fragments")["request"], item) for item in sample(fixture("fragments")["items"], SAMPLE_FRAGMENTS)
    ]
    assert any(has_errors(item) for _, item in chosen)

    def live(pair: tuple[dict, dict]) -> dict:
        request, item = pair
        return normalised(convert_text(item["tex"], sandbox=sandbox.DEFAULT, **request))

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(live, chosen))
    differing = {
        item["id"]: sorted(key for key in ANSWER_KEYS if answer[key] != item["answer"][key])
        for (_, item), answer in zip(chosen, answers, strict=True)
        if answer != item["answer"]
    }
    assert differing == {}, (
        f"live cold answers differ from the fixture's in these parts; if TeX Live or LaTeXML's configuration"
        f" changed, regenerate the fixture with {REGENERATE}"
    )
