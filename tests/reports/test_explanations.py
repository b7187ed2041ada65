"""Failures explained: category rows and the category page carry the taxonomy's meaning, and the
document report opens with its conversion in words (`explanation`), public like the report."""

from __future__ import annotations

import pytest

from conversion.taxonomy import meaning_of
from corpora.models import Task
from tests.reports.test_api import _convert

pytestmark = pytest.mark.django_db

MISSING = (
    "Warning:missing_file:revtex4-1.cls Can't find binding for class revtex4-1.cls\n"
    "Warning:missing_file:aipnum4-1.sty Can't find binding for package aipnum4-1.sty\n"
    "Warning:missing_file:revtex4-1.cls Can't find binding for class revtex4-1.cls\n"
    "Error:undefined:\\affiliation The token T_CS[\\affiliation] is not defined.\n"
    "Error:undefined:\\email The token T_CS[\\email] is not defined.\n"
    "Error:expected:} Missing }\n"
    "Error:undefined:\\preprint once more\n"
    "Status:conversion:2\n"
)
LOADED = "(Loading /x/article.cls.ltxml...\n"
WARNED = LOADED + "Warning:expected:label Missing\nWarning:missing_file:natbib.sty not found\nStatus:conversion:1\n"
FATAL = "Error:undefined:\\x one\nFatal:timeout:timedout Conversion took too long\nStatus:conversion:3\n"


@pytest.fixture
def explained(corpus_root, tmp_path, settings) -> list[Task]:
    from tests.corpora.helpers import activated, imported

    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "e", documents=5)
    activated("e")
    tasks = list(Task.objects.filter(corpus__name="e", service__name="tex_to_html").order_by("pk"))
    logs = [MISSING, FATAL, WARNED, "Status:conversion:0\n"]
    _convert(tasks[:4], logs, settings.RESULTS_DIR)
    return tasks  # the fifth stays TODO


def _document(client, task: Task) -> dict:
    from corpora.models import Document

    name = Document.objects.get(pk=task.document_id).name
    response = client.get(f"/api/corpus/e/tex_to_html/document/{name}")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_document_report_explains_errors_missing_files_and_failures(api, explained):
    errors = _document(api, explained[0])["explanation"]  # `api` has no token: the explanation is public
    assert errors["summary"] == (
        "Converted with 4 errors: parts of the output may be missing or wrong."
        " It could not load 2 files: revtex4-1.cls, aipnum4-1.sty."
    )
    assert errors["missing_files"] == ["revtex4-1.cls", "aipnum4-1.sty"]  # in log order, once each
    # The first three errors, each with its meaning at its severity.
    assert [(m["category"], m["what"]) for m in errors["causes"]] == [
        ("undefined", "\\affiliation"),
        ("undefined", "\\email"),
        ("expected", "}"),
    ]
    undefined = meaning_of("error", "undefined")
    assert errors["causes"][0]["meaning"] == undefined.meaning and errors["causes"][0]["what_names"] == "command name"
    assert errors["causes"][2]["meaning"] == meaning_of("error", "expected").meaning != undefined.meaning
    assert "not defined" in errors["causes"][0]["details"]

    fatal = _document(api, explained[1])["explanation"]
    assert fatal["summary"] == f"The conversion failed: {meaning_of('fatal', 'timeout').meaning}."
    assert [(m["severity"], m["category"]) for m in fatal["causes"]] == [("fatal", "timeout")]  # not the error
    assert fatal["missing_files"] == []

    warned = _document(api, explained[2])["explanation"]
    assert warned["summary"] == "Converted with 2 warnings. It could not load 1 file: natbib.sty."
    assert warned["causes"] == [] and warned["missing_files"] == ["natbib.sty"]
    assert _document(api, explained[3])["explanation"] == {
        "summary": "Converted without problems.",
        "causes": [],
        "missing_files": [],
    }
    todo = _document(api, explained[4])["explanation"]
    assert todo["summary"] == "Not converted: the document waits for a worker." and todo["causes"] == []


def test_category_rows_and_the_category_page_carry_their_meaning(api, explained):
    rows = {row["name"]: row for row in api.get("/api/reports/e/tex_to_html/error").json()["rows"]}
    assert rows["undefined"]["meaning"] == meaning_of("error", "undefined").meaning
    assert rows["undefined"]["what_names"] == "command name"
    assert rows["expected"]["meaning"] == meaning_of("error", "expected").meaning
    # The same category at another severity means something else.
    warnings = {row["name"]: row for row in api.get("/api/reports/e/tex_to_html/warning").json()["rows"]}
    assert warnings["missing_file"]["meaning"] == meaning_of("warning", "missing_file").meaning
    assert meaning_of("warning", "missing_file") != meaning_of("fatal", "missing_file")
    category = api.get("/api/reports/e/tex_to_html/error/undefined").json()
    assert category["meaning"] == rows["undefined"]["meaning"] and category["what_names"] == "command name"
    assert all(row.get("meaning") is None for row in category["rows"])  # what rows have none of their own
    # Info messages and categories the taxonomy does not name have no meaning.
    info = api.get("/api/reports/e/tex_to_html/info").json()
    assert [row["name"] for row in info["rows"]] == ["loaded_file"] and info["rows"][0]["meaning"] is None
    assert meaning_of("error", "no_such_category") is None and meaning_of("info", "loaded_file") is None


def test_the_taxonomy_names_every_category_of_the_specification():
    """The specification's warning, error and fatal tables, category by category."""
    spec = {
        "warning": "expected imageprocessing latex limitation malformed misdefined missing_file not_parsed perl"
        " undefined unexpected uninitialized",
        "error": "expected I/O imageprocessing latex malformed misdefined missing_file pgfparse recursion undefined"
        " unexpected",
        "fatal": "die expected I/O internal invalid misdefined missing_file perl timeout too_many_errors unexpected",
    }
    for severity, categories in spec.items():
        for category in categories.split():
            meaning = meaning_of(severity, category)
            assert meaning is not None and meaning.meaning and meaning.what, (severity, category)
    assert meaning_of("error", "i/o") == meaning_of("error", "I/O")  # any case
