"""The warm engine (conversion/warm.py) answers every formula and fragment of tests/fixtures/convert, taken
from real papers, as a cold latexmlc answers them through /convert: the same result, status and messages,
ids and timings aside (tests/conversion/convert_answers.py). The fixture holds the cold answers; its own test
(test_convert_fixture.py) holds a sample of them to a live cold latexmlc."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conversion.engine import Limits, engine_version, latexmlc_path
from conversion.warm import Profile, WarmEngine
from tests.conversion.convert_answers import normalised

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "convert"
MATH = Profile("html5", "math", "math", pmml=True)
FRAGMENT = Profile("html5", "fragment", "fragment")
READY_SECONDS = 180


def items(name: str) -> list[dict]:
    """The fixture's items; a fixture made with another LaTeXML fails with what to do."""
    data = json.loads((FIXTURE / f"{name}.json").read_text())
    made_with = data.get("latexml") or data.get("latexml_version") or data.get("version")
    installed = engine_version(latexmlc_path())
    if made_with and made_with != installed:
        pytest.fail(f"tests/fixtures/convert/{name}.json holds the answers of {made_with!r}, this machine has "
                    f"{installed!r}: run bench/make_convert_fixture.py again")  # fmt: skip
    return data["items"]


@pytest.fixture(scope="module")
def engine():
    engine = WarmEngine({MATH: 2, FRAGMENT: 1}, limits=Limits(timeout=60))
    engine.start()
    deadline = time.monotonic() + READY_SECONDS
    while not all(pool["ready"] == pool["servers"] for pool in engine.status()):
        if time.monotonic() > deadline:
            engine.stop()
            pytest.fail(f"the warm pools were not ready within {READY_SECONDS} s: {engine.status()}")
        time.sleep(0.1)
    yield engine
    engine.stop()


def differences(engine: WarmEngine, profile: Profile, cases: list[dict]) -> list[str]:
    """The ids of the cases whose warm answer differs from the stored cold one, with the first difference."""

    def answer(case: dict) -> dict:
        return normalised(engine.convert(profile, case["tex"], timeout=60, wait=60))

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(answer, cases))
    found = []
    for case, warm in zip(cases, answers, strict=True):
        cold = case["answer"]
        if warm != cold:
            part = next(key for key in cold if warm.get(key) != cold[key])
            found.append(f"{case['id']} ({part}): warm {str(warm.get(part))[:300]!r} cold {str(cold[part])[:300]!r}")
    return found


def test_every_formula_of_the_fixture_answers_warm_as_it_does_cold(engine):
    cases = items("formulas")
    assert len(cases) >= 200
    assert differences(engine, MATH, cases) == []
    assert engine.status()[0]["served"] >= len(cases)  # served warm, not by a fallback


def test_every_fragment_of_the_fixture_answers_warm_as_it_does_cold(engine):
    cases = items("fragments")
    assert len(cases) >= 20
    assert differences(engine, FRAGMENT, cases) == []
