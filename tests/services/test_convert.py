"""POST /convert: the conversion engine over HTTP, with real LaTeXML."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def _post(client, **fields: str):
    return client.post("/convert", fields)


@pytest.mark.slow
def test_a_formula_converts_to_presentation_mathml_by_default(api):
    response = _post(api, tex="literal:x^2+1", whatsin="math", whatsout="math", format="xml")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "no_problem" and body["status_code"] == 0
    assert "http://www.w3.org/1998/Math/MathML" in body["result"] and "msup>" in body["result"]
    assert "Status:conversion:0" in body["log"]


@pytest.mark.slow
def test_a_document_converts_to_html_with_its_log(api):
    tex = "\\documentclass{article}\\begin{document}Hello \\undefinedthing.\\end{document}"
    body = _post(api, tex=tex, format="html5").json()
    assert body["status"] == "error" and body["status_code"] == 2
    assert "Hello" in body["result"] and "Error:undefined:\\undefinedthing" in body["log"]


@pytest.mark.slow
def test_a_document_that_converts_to_an_empty_page_is_an_error_with_the_output_checks_message(api):
    tex = "\\documentclass{article}\\begin{document}\\iffalse A hidden body. \\fi\\end{document}"
    body = _post(api, tex=tex, format="html5").json()
    assert "Status:conversion:0" in body["log"]  # LaTeXML's own verdict
    assert body["status"] == "error" and body["status_code"] == 2
    assert "\nError:output_empty:body the document is empty" in body["log"]
    assert body["log"].endswith("Status:conversion:2\n")


def test_empty_input_is_a_400_with_status_code_3_and_a_log_line(api):
    for tex in ("", "   ", "literal:"):
        response = _post(api, tex=tex)
        assert response.status_code == 400 and response["Content-Type"] == PROBLEM
        body = response.json()
        assert body["status_code"] == 3 and body["log"].startswith("Fatal:input:empty")


def test_oversized_input_is_a_400_with_status_code_3(api, settings):
    settings.CONVERT_MAX_BYTES = 100
    body = _post(api, tex="x" * 101).json()
    assert body["status_code"] == 3 and "Fatal:input:too_large" in body["log"]


def test_unknown_switch_values_are_400_field_errors(api):
    for field, value in (("format", "pdf"), ("whatsin", "poem"), ("timeout", "-1"), ("pmml", "maybe")):
        response = _post(api, tex="x", **{field: value})
        assert response.status_code == 400 and field in response.json()["errors"], field


def test_json_bodies_are_refused_as_the_engine_takes_forms(api):
    assert api.post("/convert", {"tex": "x"}, format="json").status_code == 415


def test_over_the_limit_the_answer_is_an_immediate_503_problem_with_retry_after(api, settings):
    from services.convert_slots import convert_slot_take

    settings.CONVERT_CONCURRENCY = 1
    held = convert_slot_take()
    assert held is not None
    try:
        response = _post(api, tex="literal:x", whatsin="math", whatsout="math")
    finally:
        held.release()
    assert response.status_code == 503 and response["Content-Type"] == PROBLEM
    assert int(response["Retry-After"]) >= 1
    body = response.json()
    assert body["status_code"] == 3 and body["log"].startswith("Fatal:input:busy")


def test_slots_exclude_each_other_within_a_process_and_come_back_when_released(tmp_path):
    from services.convert_slots import convert_slot_take, convert_slots_busy

    first, second = (convert_slot_take(limit=2, directory=tmp_path) for _ in range(2))
    assert {first.number, second.number} == {0, 1}
    assert convert_slot_take(limit=2, directory=tmp_path) is None
    assert convert_slots_busy(limit=2, directory=tmp_path) == 2
    first.release()
    first.release()  # a second release does nothing
    assert convert_slots_busy(limit=2, directory=tmp_path) == 1
    again = convert_slot_take(limit=2, directory=tmp_path)
    assert again is not None and again.number == first.number
    second.release()
    again.release()
    assert convert_slots_busy(limit=2, directory=tmp_path) == 0


@pytest.mark.slow
def test_each_request_converts_under_the_conversion_limits_of_the_settings(api, settings):
    tex = "\\documentclass{article}\\begin{document}Hello.\\end{document}"
    settings.CONVERSION_MAX_PROCESSES = 1  # fewer than the sandbox itself runs: killed at the first check
    body = _post(api, tex=tex).json()
    assert body["status_code"] == 3 and "Fatal:limit:processes" in body["log"], body["log"]
    settings.CONVERSION_MAX_PROCESSES = 64
    settings.CONVERSION_MEMORY_MB = 64  # far too little address space for latexmlc's Perl
    body = _post(api, tex=tex).json()
    assert body["status_code"] == 3 and "Hello" not in body["result"], body["log"]
    settings.CONVERSION_MEMORY_MB = 4096  # the next request reads the settings again
    body = _post(api, tex=tex).json()
    assert body["status_code"] == 0 and "Hello" in body["result"], body["log"]
