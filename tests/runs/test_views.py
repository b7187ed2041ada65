"""The run screens: twins of /api/runs and /api/compare (same queries and DTOs), heat maps whose cells
lead to exactly their documents, the tallies chart, the links to them, and the journaled snapshot."""

from __future__ import annotations

import json
import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from accounts.models import AuditEntry
from corpora.models import Run, Snapshot
from tests.corpora.helpers import activated, imported
from tests.runs.helpers import NEXT, two_runs

pytestmark = pytest.mark.django_db

PAIR = "/runs/a/tex_to_html"
COMPARE = "/compare/a/tex_to_html/tex_to_html_next"


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))


@pytest.fixture
def history(corpus_root) -> None:
    two_runs(corpus_root)


def _cells(body: str) -> dict[tuple[str, str], tuple[int, str | None, bool]]:
    """The heat map's cells: (row, column) -> (count, link, marked as a regression)."""
    cells = {}
    pattern = r'<td class="heat ([^"]*)" data-row="(\w+)" data-column="(\w+)" data-count="(\d+)">(.*?)</td>'
    for classes, row, column, count, inner in re.findall(pattern, body):
        link = re.search(r'href="([^"]*)"', inner)
        cells[(row, column)] = (int(count), unescape(link[1]) if link else None, "regression" in classes.split())
    return cells


# --- twins -------------------------------------------------------------------------------------------


def test_the_run_list_renders_the_same_dto_as_the_api(client, api, history):
    for params in ({}, {"corpus": "a"}, {"service": "tex_to_html", "limit": 1}, {"owner": "tester", "limit": 900}):
        screen = client.get("/runs", params)
        assert screen.status_code == 200, params
        assert _plain(screen.context["runs"]) == api.get("/api/runs", params).json(), params
    assert len(client.get("/runs", {"service": "tex_to_html"}).context["runs"]) == 2
    body = client.get("/runs").content.decode()
    assert f'href="{PAIR}"' in body and f'href="/runs/a/{NEXT}"' in body


def test_the_run_list_form_leaves_empty_filters_out(client, api, history):
    screen = client.get("/runs", {"corpus": "", "service": "tex_to_html", "owner": "", "limit": ""})
    assert screen.status_code == 200
    assert _plain(screen.context["runs"]) == api.get("/api/runs", {"service": "tex_to_html"}).json()


def test_the_pair_page_renders_the_same_dtos_as_its_api_twins(client, api, history):
    screen = client.get(PAIR)
    assert screen.status_code == 200
    assert _plain(screen.context["runs"]) == api.get(f"/api{PAIR}").json()
    assert screen.context["current"] is None and api.get(f"/api{PAIR}/current").json() is None
    assert _plain(screen.context["diff"]) == api.get(f"/api{PAIR}/diff").json()
    twin = api.get(f"/api{PAIR}/tasks", {"change": "regressed", "page_size": 50}).json()
    assert _plain(screen.context["regressions"]) == twin
    assert [(t["document"], t["previous_status"], t["current_status"]) for t in twin] == [
        ("doc1", "no_problem", "error")
    ]
    assert _plain(client.get(PAIR, {"limit": 1}).context["runs"]) == api.get(f"/api{PAIR}", {"limit": 1}).json()


def test_the_pair_page_shows_the_open_run_with_live_tallies(client, api, corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a")
    screen = client.get(PAIR)
    current = api.get(f"/api{PAIR}/current").json()
    assert current["open"] and current["tallies"]["todo"] == 3
    assert _plain(screen.context["current"]) == current
    body = screen.content.decode()
    assert 'id="current-run"' in body and 'data-count="todo">3<' in body
    assert "A diff needs two snapshots" in body and screen.context["diff"]["matrix"] == []


def test_the_diff_screen_renders_the_same_dto_as_the_api(client, api, history):
    default = client.get(f"{PAIR}/diff")
    assert default.status_code == 200
    diff = api.get(f"/api{PAIR}/diff").json()
    assert _plain(default.context["diff"]) == diff
    dates = diff["available_dates"]
    for params in ({"previous": dates[1], "current": dates[0]}, {"previous": dates[0], "current": dates[1]}):
        screen = client.get(f"{PAIR}/diff", params)
        assert _plain(screen.context["diff"]) == api.get(f"/api{PAIR}/diff", params).json()
    body = default.content.decode()
    for date in dates:
        assert f'<option value="{date}"' in body
    assert f'<option value="{dates[1]}" selected>' in body.split('id="current"')[0]


def test_the_task_list_screen_renders_the_same_dto_as_the_api(client, api, history):
    cases = [
        {},
        {"previous_status": "fatal", "current_status": "warning"},
        {"current_status": "error"},
        {"change": "regressed"},
        {"offset": 1, "page_size": 1},
    ]
    for params in cases:
        screen = client.get(f"{PAIR}/tasks", params)
        assert screen.status_code == 200, params
        assert _plain(screen.context["tasks"]) == api.get(f"/api{PAIR}/tasks", params).json(), params
    tasks = client.get(f"{PAIR}/tasks").context["tasks"]
    assert sorted((t["document"], t["previous_status"], t["current_status"]) for t in tasks) == [
        ("doc1", "no_problem", "error"),
        ("doc3", "fatal", "warning"),
    ]


def test_the_comparison_screens_render_the_same_dtos_as_the_api(client, api, history):
    screen = client.get(COMPARE)
    assert screen.status_code == 200
    assert _plain(screen.context["compare"]) == api.get(f"/api{COMPARE}").json()
    for params in ({}, {"status_a": "warning", "status_b": "fatal"}, {"change": "regressed"}, {"page_size": 1}):
        tasks = client.get(f"{COMPARE}/tasks", params)
        assert tasks.status_code == 200, params
        assert _plain(tasks.context["tasks"]) == api.get(f"/api{COMPARE}/tasks", params).json(), params
    (differ,) = client.get(f"{COMPARE}/tasks").context["tasks"]
    assert (differ["document"], differ["status_a"], differ["status_b"]) == ("doc3", "warning", "fatal")


V087, V088, OXIDE = "latexmlc (LaTeXML version 0.8.7)", "latexmlc (LaTeXML version 0.8.8)", "latexml-oxide 0.1.0"


@pytest.fixture
def profiled(corpus_root) -> None:
    """Corpus a with two closed runs of tex_to_html, the first under the default profile (one version), the
    second under the arxiv preset on a mixed fleet (two versions); tex_to_html_next runs the engine
    latexml-oxide. The versions are noted as the dispatcher notes its workers' heartbeats."""
    from conversion.profiles import Profile
    from corpora.actions.reports import rerun
    from corpora.pairs import runs_engine_versions_note
    from services.actions import service_profile_set, service_register
    from services.models import Service
    from tests.runs.helpers import FIRST, SECOND, UNDER_NEXT, finish

    imported(corpus_root, "a", documents=4)
    activated("a")
    tex = Service.objects.get(name="tex_to_html").pk
    runs_engine_versions_note({tex: {V087}})
    finish(FIRST)
    service_profile_set(name="tex_to_html", actor="tester", preset="arxiv")
    rerun(corpus_name="a", service_name="tex_to_html", actor="tester", description="under arxiv")
    runs_engine_versions_note({tex: {V087, V088}})
    finish(SECOND)
    service_register(name=NEXT, actor="tester", profile=Profile(engine="latexml-oxide").as_json())
    activated("a", NEXT)
    runs_engine_versions_note({Service.objects.get(name=NEXT).pk: {OXIDE}})
    finish(UNDER_NEXT, NEXT)


def test_runs_show_their_engine_versions_and_profile_on_screen_as_in_the_api(client, api, profiled):
    from conversion.profiles import DEFAULT, PRESETS

    arxiv = PRESETS["arxiv"].profile
    runs = api.get(f"/api{PAIR}").json()
    newest, oldest = runs
    assert (newest["engine"], newest["engine_versions"], newest["profile"], newest["profile_hash"]) == (
        "latexmlc", [V087, V088], arxiv.as_json(), arxiv.digest,
    )  # fmt: skip
    assert (oldest["engine_versions"], oldest["profile"], oldest["profile_hash"]) == (
        [V087],
        DEFAULT.as_json(),
        DEFAULT.digest,
    )
    # The preset was set after the first run had closed: its profile did not change while it was open.
    assert oldest["profile_changed"] is False and oldest["profile_hashes"] == [DEFAULT.digest]
    screen = client.get(PAIR)
    assert _plain(screen.context["runs"]) == runs
    rows = dict(re.findall(r'<tr data-run="(\d+)"[^>]*>(.*?)</tr>', screen.content.decode(), re.S))
    assert V088 in rows[str(newest["id"])] and arxiv.digest[:12] in rows[str(newest["id"])]
    assert V088 not in rows[str(oldest["id"])] and DEFAULT.digest[:12] in rows[str(oldest["id"])]


def test_the_diff_shows_the_run_of_each_snapshot_with_its_engine_versions_and_profile(client, api, profiled):
    from conversion.profiles import DEFAULT, PRESETS

    diff = api.get(f"/api{PAIR}/diff").json()
    before, after = diff["previous_run"], diff["current_run"]
    assert (before["profile_hash"], before["engine_versions"], before["profile"]) == (
        DEFAULT.digest, [V087], DEFAULT.as_json(),
    )  # fmt: skip
    assert (after["profile_hash"], after["engine_versions"]) == (PRESETS["arxiv"].profile.digest, [V087, V088])
    screen = client.get(f"{PAIR}/diff")
    assert _plain(screen.context["diff"]) == diff
    body = screen.content.decode()
    panel = body.split('id="diff-runs"')[1].split("</div>\n</div>")[0]
    assert DEFAULT.digest[:12] in panel and PRESETS["arxiv"].profile.digest[:12] in panel
    assert "mixed fleet" in panel and V088 in panel


def test_the_comparison_shows_both_services_engine_versions_and_profiles_on_screen_as_in_the_api(client, api, profiled):
    from conversion.profiles import PRESETS, Profile

    compare = api.get(f"/api{COMPARE}").json()
    a, b = compare["profile_a"], compare["profile_b"]
    assert (a["service"], a["engine"], a["profile_preset"], a["profile"]) == (
        "tex_to_html", "latexmlc", "arxiv", PRESETS["arxiv"].profile.as_json(),
    )  # fmt: skip
    assert a["run"]["engine_versions"] == [V087, V088] and a["run"]["profile_hash"] == a["profile_hash"]
    oxide = Profile(engine="latexml-oxide")
    assert (b["service"], b["engine"], b["profile_preset"], b["profile_hash"]) == (
        NEXT, "latexml-oxide", None, oxide.digest,
    )  # fmt: skip
    assert (b["run"]["engine"], b["run"]["engine_versions"], b["run"]["profile"]) == (
        "latexml-oxide", [OXIDE], oxide.as_json(),
    )  # fmt: skip
    screen = client.get(COMPARE)
    assert _plain(screen.context["compare"]) == compare
    table = screen.content.decode().split('id="compare-profiles"')[1].split("</table>")[0]
    for expected in (a["profile_hash"], b["profile_hash"]):
        assert f'data-profile-hash="{expected}"' in table
    assert V088 in table and OXIDE in table and "<code>latexml-oxide</code>" in table


def test_a_profile_changed_while_a_run_is_open_is_said_on_its_page(client, api, corpus_root):
    from services.actions import service_profile_set

    imported(corpus_root, "a", documents=2)
    activated("a")
    service_profile_set(name="tex_to_html", actor="tester", nodefaultresources=True)
    current = api.get(f"/api{PAIR}/current").json()
    assert current["profile_changed"] is True and len(current["profile_hashes"]) == 2
    screen = client.get(PAIR)
    assert _plain(screen.context["current"]) == current
    assert "changed while open: 2 profiles" in screen.content.decode().split('id="current-run"')[1]


def test_bad_input_and_unknown_names_answer_with_the_apis_status_and_words(client, api, history):
    cases = [
        ("/runs", {"limit": "0"}),
        ("/runs", {"limit": "many"}),
        (PAIR, {"limit": "0"}),
        (f"{PAIR}/diff", {"previous": "yesterday"}),
        (f"{PAIR}/diff", {"previous": "2001-01-01T00:00:00Z"}),
        (f"{PAIR}/tasks", {"current": "not a date"}),
        (f"{PAIR}/tasks", {"previous_status": "great"}),
        (f"{PAIR}/tasks", {"change": "better"}),
        (f"{PAIR}/tasks", {"offset": "-1"}),
        ("/runs/a/nope", {}),
        ("/runs/nope/tex_to_html", {}),
        ("/runs/a/tex_to_html_other/diff", {}),
        (f"{COMPARE}/tasks", {"status_b": "great"}),
        ("/compare/a/tex_to_html/tex_to_html", {}),
        ("/compare/a/tex_to_html/nope", {}),
        ("/compare/nope/tex_to_html/tex_to_html_next/tasks", {}),
    ]
    for path, params in cases:
        screen, twin = client.get(path, params), api.get(f"/api{path}", params)
        assert twin.status_code in (400, 404), path
        assert screen.status_code == twin.status_code, (path, params)
        assert screen.context["detail"] == twin.json()["detail"], (path, params)
        assert f"<h1>{twin.status_code}</h1>" in screen.content.decode()


# --- heat maps, chart, lists ---------------------------------------------------------------------------


def test_every_changed_cell_of_the_diff_heat_map_lists_exactly_its_documents(client, history):
    diff_page = client.get(f"{PAIR}/diff")
    cells = _cells(diff_page.content.decode())
    matrix = {(c["previous"], c["current"]): c for c in diff_page.context["diff"]["matrix"]}
    assert {key: count for key, (count, _, _) in cells.items() if count} == {k: c["count"] for k, c in matrix.items()}
    linked = {key for key, (count, href, _) in cells.items() if href}
    assert linked == {key for key, (count, _, _) in cells.items() if count and key[0] != key[1]}
    assert linked == {("no_problem", "error"), ("fatal", "warning")}
    assert [key for key, (_, _, regression) in cells.items() if regression] == [("no_problem", "error")]
    for (previous, current), (count, href, _) in cells.items():
        if href is None:
            continue
        query = parse_qs(urlsplit(href).query)
        assert query["previous_status"] == [previous] and query["current_status"] == [current]
        landed = client.get(href)
        shown = [(t["previous_status"], t["current_status"]) for t in landed.context["tasks"]]
        assert shown == [(previous, current)] * count and landed.context["count"] == count


def test_the_comparison_heat_map_links_each_differing_cell_to_its_documents(client, history):
    cells = _cells(client.get(COMPARE).content.decode())
    linked = {key: href for key, (_, href, _) in cells.items() if href}
    assert list(linked) == [("warning", "fatal")] and cells[("warning", "fatal")][2]
    landed = client.get(linked[("warning", "fatal")])
    assert [t["document"] for t in landed.context["tasks"]] == ["doc3"]
    body = landed.content.decode()
    assert 'href="/corpus/a/tex_to_html/document/doc3"' in body and f'href="/corpus/a/{NEXT}/document/doc3"' in body


def test_the_tallies_chart_draws_one_stack_per_run_to_scale(client, history):
    response = client.get(PAIR)
    svg = response.content.decode()
    svg = svg[svg.index('<svg id="tallies-chart"') : svg.index("</svg>", svg.index('<svg id="tallies-chart"'))]
    runs = response.context["runs"]
    groups = re.findall(r'<g class="run" data-run="(\d+)">(.*?)</g>', svg, re.S)
    assert [int(run_id) for run_id, _ in groups] == [run["id"] for run in reversed(runs)]  # oldest on the left
    for (_, group), run in zip(groups, reversed(runs), strict=True):
        rects = re.findall(r'<rect class="st-(\w+)" data-status="\w+" data-count="(\d+)"[^>]* height="([\d.]+)"', group)
        assert {status: int(count) for status, count, _ in rects} == {
            key: value for key, value in run["tallies"].items() if value and key not in ("total", "in_progress")
        }
        for _, count, height in rects:
            assert float(height) == pytest.approx(186 * int(count) / 4, abs=0.01)
    assert "style=" not in svg


def test_the_regressions_link_to_their_document_screens(client, history):
    body = client.get(PAIR).content.decode()
    section = body[body.index('id="regressions"') :]
    assert 'href="/corpus/a/tex_to_html/document/doc1"' in section
    assert "/document/doc3" not in section  # got better, not worse
    document = client.get("/corpus/a/tex_to_html/document/doc1")
    assert document.status_code == 200 and document.context["document"]["status"] == "error"


def test_snapshot_dates_link_each_to_its_diff_with_the_one_before(client, history):
    response = client.get(PAIR)
    snapshots = response.context["snapshots"]
    dates = response.context["diff"]["available_dates"]
    assert [s["date"] for s in snapshots] == dates and snapshots[-1]["href"] is None
    query = parse_qs(urlsplit(snapshots[0]["href"]).query)
    assert query == {"previous": [dates[1]], "current": [dates[0]]}
    assert client.get(snapshots[0]["href"]).context["diff"]["changed"] == 2


def test_the_task_list_pages_keep_the_filters_and_count_the_rows(client, history):
    first = client.get(f"{PAIR}/tasks", {"page_size": 1})
    pager = first.context["pager"]
    assert (pager["start"], pager["end"], pager["count"]) == (1, 1, 2)
    query = parse_qs(urlsplit(pager["next"]).query)
    assert query["offset"] == ["1"] and query["page_size"] == ["1"] and "previous" in query and "current" in query
    second = client.get(f"{PAIR}/tasks{pager['next']}")
    assert [t["document"] for t in first.context["tasks"] + second.context["tasks"]] == ["doc3", "doc1"]
    assert second.context["pager"]["next"] is None
    filtered = client.get(f"{PAIR}/tasks", {"change": "regressed", "offset": 1, "page_size": 1}).context["pager"]
    assert filtered["count"] == 1 and filtered["next"] is None and filtered["end"] == 1
    assert parse_qs(urlsplit(filtered["first"]).query)["change"] == ["regressed"]


# --- links ---------------------------------------------------------------------------------------------


def test_the_corpus_report_and_nav_lead_to_the_run_screens(client, history):
    corpus = client.get("/corpora/a").content.decode()
    assert f'href="{PAIR}"' in corpus and f'href="/runs/a/{NEXT}"' in corpus
    assert 'href="/runs/a/import"' not in corpus
    assert 'action="/compare/a"' in corpus and '<option value="tex_to_html_next"' in corpus
    overview = client.get("/reports/a/tex_to_html").content.decode()
    assert f'href="{PAIR}">Run history<' in overview and f'href="{COMPARE}">Compare with {NEXT}<' in overview
    assert "Run history" not in client.get("/reports/a/import").content.decode()
    runs = client.get("/runs").content.decode()
    assert 'href="/runs" aria-current="page">Runs<' in runs


def test_the_comparison_form_leads_to_the_pair_and_refuses_a_missing_service(client, history):
    response = client.get("/compare/a", {"service_a": "tex_to_html", "service_b": NEXT})
    assert response.status_code == 302 and response["Location"] == COMPARE
    assert client.get("/compare/a", {"service_a": "tex_to_html"}).status_code == 400
    assert client.get("/compare/a", {"service_a": "x/y", "service_b": NEXT}).status_code == 400


# --- snapshot --------------------------------------------------------------------------------------------


def test_taking_a_snapshot_needs_sign_in(history):
    anonymous = Client()
    assert 'id="take-snapshot"' not in anonymous.get(PAIR).content.decode()
    before = Snapshot.objects.count()
    response = anonymous.post(f"{PAIR}/snapshot")
    assert response.status_code == 302 and response["Location"].startswith("/login")
    assert Snapshot.objects.count() == before and not AuditEntry.objects.filter(action="runs.snapshot").exists()


def test_the_snapshot_button_appends_one_snapshot_and_is_journaled(screen_client, history):
    page = screen_client.get(PAIR).content.decode()
    assert f'action="{PAIR}/snapshot"' in page
    before = Snapshot.objects.count()
    response = screen_client.post(f"{PAIR}/snapshot")
    assert response.status_code == 302 and response["Location"] == PAIR
    assert Snapshot.objects.count() == before + 1
    snapshot = Snapshot.objects.order_by("-taken_at").first()
    assert snapshot.tasks == 4 and snapshot.service.name == "tex_to_html"
    entry = AuditEntry.objects.get(action="runs.snapshot")
    assert (entry.actor, entry.target, entry.outcome) == ("tester", "a/tex_to_html", "ok")
    followed = screen_client.get(PAIR)
    assert "Snapshot of 4 tasks taken at" in followed.content.decode()
    assert len(followed.context["diff"]["available_dates"]) == 3
    assert Run.objects.filter(finished_at__isnull=True, service__name="tex_to_html").count() == 0


def test_a_snapshot_of_an_unknown_pair_is_404_and_journaled_as_failed(screen_client, history):
    response = screen_client.post("/runs/a/nope/snapshot")
    assert response.status_code == 404
    entry = AuditEntry.objects.get(action="runs.snapshot")
    assert entry.target == "a/nope" and entry.status_code == 404
