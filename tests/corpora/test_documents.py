"""A pair's documents: the list of the screen and its API twin (one query, one DTO), its status filter and
its name-prefix search (served by an index), the links of each row, and refusals in the API's words."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.api.paging import Page
from corpora.actions.reports import rerun
from corpora.models import Document, Task
from corpora.queries.corpora import document_list, pair_resolve
from dispatcher.ingest import RawResult, result_ingest
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import result_zip

pytestmark = pytest.mark.django_db

HTML = {"doc.html": b"<!DOCTYPE html><html><body><p>converted</p></body></html>", "x.png": b"\x89PNG\r\n\x1a\n"}
# name: (how its conversion ended, the files of its result beside the log); None: no result yet.
DOCUMENTS = {
    "Beta": ("Warning:expected:label Missing\nStatus:conversion:1\nInfo:runtime_ms:850\n", HTML),
    "al_pha": (
        "Warning:expected:label Missing\nError:undefined:\\foo The token\nError:malformed:tabular x\n"
        "Error:undefined:\\bar The token\nStatus:conversion:2\nInfo:runtime_ms:142935\n",
        HTML,
    ),
    "delta": None,  # TODO
    "a%b": (  # no HTML in its result
        "Error:missing_file:x.sty Missing\nFatal:too_many_errors:100 Too many errors\nStatus:conversion:3\n",
        {},
    ),
    "Gamma": None,  # leased
    "alpha": ("Status:conversion:0\nInfo:runtime_ms:3840000\n", HTML),
}
ORDER = ["a%b", "al_pha", "alpha", "Beta", "delta", "Gamma"]  # names folded to lower case, byte order
SCREEN = "/corpora/c/services/tex_to_html/documents"
API = "/api" + SCREEN


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))


@pytest.fixture
def pair(corpus_root, tmp_path, settings) -> dict[str, Task]:
    """Corpus c on tex_to_html with DOCUMENTS, converted through the real ingestion; Gamma leased."""
    settings.RESULTS_DIR = tmp_path / "results"
    imported(corpus_root, "c", documents=len(DOCUMENTS))
    activated("c")
    tasks = dict(zip(DOCUMENTS, Task.objects.filter(corpus__name="c", service__name="tex_to_html").order_by("pk"),
                     strict=True))  # fmt: skip
    for name, task in tasks.items():
        Document.objects.filter(pk=task.document_id).update(name=name)
    converted = {name: tasks[name] for name, result in DOCUMENTS.items() if result is not None}
    Task.objects.filter(pk__in=[t.pk for t in converted.values()] + [tasks["Gamma"].pk]).update(status=77)
    batch = [
        RawResult("w", "tex_to_html", str(task.pk), result_zip(DOCUMENTS[name][0], DOCUMENTS[name][1]))
        for name, task in converted.items()
    ]
    result_ingest(batch, service_ids={"tex_to_html": tasks["alpha"].service_id}, results_dir=settings.RESULTS_DIR,
                  max_bytes=10**7)  # fmt: skip
    return tasks


def _names(body: dict) -> list[str]:
    return [row["document"] for row in body["documents"]]


# --- the query ---------------------------------------------------------------------------------------


def test_the_documents_come_in_the_order_of_their_folded_names_with_their_status_and_html(api, pair):
    body = api.get(API).json()
    assert _names(body) == ORDER and body["count"] == 6
    rows = {row["document"]: row for row in body["documents"]}
    statuses = {name: row["status"] for name, row in rows.items()}
    assert statuses == {"a%b": "fatal", "al_pha": "error", "alpha": "no_problem", "Beta": "warning",
                        "delta": "todo", "Gamma": "queued"}  # fmt: skip
    assert {name for name, row in rows.items() if row["has_html"]} == {"al_pha", "alpha", "Beta"}
    assert rows["alpha"]["html"] == "/api/corpus/c/tex_to_html/document/alpha/html"
    assert rows["a%b"]["html"] is None and rows["delta"]["html"] is None
    assert rows["a%b"]["report"] == "/api/corpus/c/tex_to_html/document/a%25b"
    assert rows["alpha"]["entry"] == Document.objects.get(corpus__name="c", name="alpha").entry


def test_each_document_has_its_runtime_and_the_class_of_its_first_error_or_fatal_message(api, pair):
    rows = {row["document"]: row for row in api.get(API).json()["documents"]}
    assert {name: row["runtime_ms"] for name, row in rows.items()} == {
        "a%b": None, "al_pha": 142935, "alpha": 3840000, "Beta": 850, "delta": None, "Gamma": None,
    }  # fmt: skip
    problems = {name: row["problem"] for name, row in rows.items()}
    assert problems == {
        "a%b": {"severity": "error", "category": "missing_file", "what": "x.sty"},  # first in the log, not worst
        "al_pha": {"severity": "error", "category": "undefined", "what": "\\foo"},
        "alpha": None, "Beta": None, "delta": None, "Gamma": None,  # a warning is no error
    }  # fmt: skip


def test_a_rerun_document_shows_no_runtime_nor_its_retired_messages(api, pair):
    rerun(corpus_name="c", service_name="tex_to_html", severity="error", actor="test")
    row = next(row for row in api.get(API).json()["documents"] if row["document"] == "al_pha")
    assert (row["status"], row["runtime_ms"], row["problem"]) == ("todo", None, None)


@pytest.mark.parametrize(
    ("status", "names"),
    [
        ("error", ["al_pha"]), ("fatal", ["a%b"]), ("no_problem", ["alpha"]), ("warning", ["Beta"]),
        ("invalid", []), ("todo", ["delta"]), ("queued", ["Gamma"]), ("in_progress", ["delta", "Gamma"]),
        ("blocked", []),
    ],
)  # fmt: skip
def test_the_status_filter_takes_the_statuses_of_the_counts_and_counts_them(api, pair, status, names):
    body = api.get(API, {"status": status}).json()
    assert (_names(body), body["count"], body["status"]) == (names, len(names), status)
    counts = api.get("/api/corpora/c").json()["services"]
    assert body["count"] == next(s["counts"][status] for s in counts if s["name"] == "tex_to_html")


@pytest.mark.parametrize(
    ("prefix", "names"),
    [("AL", ["al_pha", "alpha"]), ("al_", ["al_pha"]), ("a%", ["a%b"]), ("gAm", ["Gamma"]), ("zz", [])],
)
def test_the_name_prefix_is_case_insensitive_and_its_wildcards_are_plain_characters(api, pair, prefix, names):
    body = api.get(API, {"name_prefix": prefix}).json()
    assert (_names(body), body["name_prefix"]) == (names, prefix)
    assert body["count"] is None  # counting a prefix would read every match


def test_the_filters_combine_and_pages_follow_the_same_order(api, pair):
    assert _names(api.get(API, {"name_prefix": "a", "status": "error"}).json()) == ["al_pha"]
    page = api.get(API, {"offset": 2, "page_size": 2}).json()
    assert (_names(page), page["offset"], page["page_size"], page["count"]) == (["alpha", "Beta"], 2, 2, 6)


def test_the_name_prefix_is_a_range_of_the_folded_name_index(pair):
    """The planner can answer a prefix from document_name_folded, in its order: the pattern is folded by
    the same lower() as the index key, and compared in its collation."""
    with CaptureQueriesContext(connection) as captured:
        document_list(pair_resolve("c", "tex_to_html"), status=None, name_prefix="Al", page=Page(0, 100))
    sql = next(q["sql"] for q in captured.captured_queries if "corpora_document d" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using document_name_folded" in plan, plan
    assert ">= 'al'::text" in plan and "< 'am'::text" in plan, plan  # the prefix as a range of the key
    # And the index gives the order: nothing sorts the documents (a row's message classes are sorted in it).
    assert [line.strip() for line in plan.splitlines() if "Sort Key" in line] == ['Sort Key: u."position"'], plan


def test_a_page_costs_the_same_queries_however_many_rows_it_has(pair):
    queries = []
    for size in (1, 6):
        with CaptureQueriesContext(connection) as captured:
            document_list(pair_resolve("c", "tex_to_html"), status=None, name_prefix=None, page=Page(0, size))
        queries.append(len(captured))
    assert queries[0] == queries[1]


# --- refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [{"status": "done"}, {"status": "-3"}, {"page_size": "0"}, {"offset": "-1"}, {"offset": "100001"},
     {"name_prefix": "x" * 256}],
)  # fmt: skip
def test_a_filter_the_list_cannot_take_is_a_400_problem_on_the_api_and_the_screen(client, api, pair, query):
    answer = api.get(API, query)
    assert answer.status_code == 400 and answer["Content-Type"] == "application/problem+json"
    screen = client.get(SCREEN, query)
    assert screen.status_code == 400 and answer.json()["detail"] in screen.content.decode()


def test_an_empty_filter_narrows_nothing_on_either(client, api, pair):
    empty = {"status": "", "name_prefix": ""}
    assert _names(api.get(API, empty).json()) == ORDER == _names(client.get(SCREEN, empty).context["documents"])


def test_an_unknown_corpus_or_service_is_a_404_on_both(client, api, pair):
    for path in ("/corpora/nope/services/tex_to_html/documents", "/corpora/c/services/nope/documents"):
        assert api.get(f"/api{path}").status_code == 404 == client.get(path).status_code, path


# --- the screen ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query", [{}, {"status": "error"}, {"name_prefix": "al"}, {"status": "in_progress", "page_size": 1}]
)
def test_the_screen_renders_the_same_dto_as_the_api(client, api, pair, query):
    screen = client.get(SCREEN, query)
    assert screen.status_code == 200
    assert _plain(screen.context["documents"]) == api.get(API, query).json()


def test_each_row_links_its_document_screen_and_its_reader_only_when_it_has_html(client, pair):
    body = client.get(SCREEN).content.decode()
    for name in ORDER:
        row = body[body.index(f'<tr data-document="{name}">') :]
        row = row[: row.index("</tr>")]
        escaped = name.replace("%", "%25")
        assert f'href="/corpus/c/tex_to_html/document/{escaped}"' in row, name
        reader = f'href="/corpus/c/tex_to_html/document/{escaped}/read"'
        assert (reader in row) == (name in {"al_pha", "alpha", "Beta"}), name
        assert ("no HTML" in row) == (reader not in row), name


def test_the_pager_keeps_the_filters(client, pair):
    pager = client.get(SCREEN, {"status": "in_progress", "page_size": 1}).context["pager"]
    assert pager["next"] == "?status=in_progress&offset=1&page_size=1" and pager["count"] == 2
    assert client.get(SCREEN, {"name_prefix": "a", "page_size": 2}).context["pager"]["count"] is None


def test_the_corpus_screen_links_the_documents_of_each_service(client, pair):
    body = client.get("/corpora/c").content.decode()
    for service in ("import", "tex_to_html"):
        assert f'href="/corpora/c/services/{service}/documents"' in body, service
