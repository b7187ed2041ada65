"""docs/workers.md's account of POST /convert's input agrees with the engine: its example converts a
formula with no problem, and the same text without `whatsin=math` is read as a document, where `\\frac`
is undefined, as the docs say."""

from __future__ import annotations

import itertools
import re
import shlex

import pytest

from tests.support import PROJECT_DIR

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def _documented_example() -> dict[str, str]:
    """The form fields of the curl example under docs/workers.md's `POST /convert`."""
    text = (PROJECT_DIR / "docs" / "workers.md").read_text()
    section = text.split("## `POST /convert`", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "docs/workers.md shows no curl example for POST /convert"
    words = shlex.split(block.group(1).replace("\\\n", " "))
    assert words[0] == "curl" and words[-1].endswith("/convert")
    fields = {}
    for flag, value in itertools.pairwise(words):
        if flag in ("-d", "--data-urlencode"):
            name, _, field = value.partition("=")
            fields[name] = field
    return fields


def test_the_documented_formula_example_converts_with_no_problem(api):
    fields = _documented_example()
    assert fields["tex"].startswith("literal:") and fields["whatsin"] == "math"
    body = api.post("/convert", fields).json()
    assert body["status"] == "no_problem", body["log"]
    assert "<math" in body["result"] and "mfrac" in body["result"]


def test_without_whatsin_math_the_formula_is_read_as_a_document_where_frac_is_undefined(api):
    fields = {name: value for name, value in _documented_example().items() if name not in ("whatsin", "whatsout")}
    body = api.post("/convert", fields).json()
    assert body["status"] == "error" and "Error:undefined:\\frac" in body["log"]
