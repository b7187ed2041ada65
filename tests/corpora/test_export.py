"""Dataset export: the request's checks (before any job), the archives and manifest, an interrupted export
finished by running it again, downloads confined to EXPORT_ROOT, the screens; and, with real conversions
(a dispatcher and sandboxed LaTeXML workers), archives holding exactly the HTML of the manifest's documents."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from conversion.choices import TaskStatus
from conversion.zips import ZipOut
from corpora.export import job as export_job
from corpora.models import Task
from corpora.results import result_copy, result_path
from jobs.models import Job
from jobs.runner import job_run
from tests.corpora.helpers import activated
from tests.support import write_tex

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
NAMES = ("2401.00001", "2401.00002", "math0601001", "hep-th9912001", "notes")
EXPORT = "/api/corpora/papers/services/tex_to_html/export-dataset"


@pytest.fixture
def roots(tmp_path: Path, settings: Any) -> Path:
    """EXPORT_ROOT and RESULTS_DIR of this test."""
    settings.EXPORT_ROOT = (tmp_path / "exports").resolve()
    settings.EXPORT_ROOT.mkdir()
    settings.RESULTS_DIR = (tmp_path / "results").resolve()
    return settings.EXPORT_ROOT


def _import(corpus_root: Path, names: tuple[str, ...], texts: dict[str, str] | None = None) -> None:
    from corpora.actions.corpora import corpus_import

    directory = corpus_root / "papers"
    for name in names:
        if texts:
            write_tex(directory / f"{name}.tex", texts[name])
        else:
            write_tex(directory / f"{name}.tex")
    job_run(corpus_import(name="papers", path=str(directory), actor="tester", send=False).pk)


@pytest.fixture
def converted(corpus_root: Path, roots: Path) -> dict[str, int]:
    """The corpus `papers` with tex_to_html results written as a worker would: statuses set and one
    result ZIP per task (an HTML page and an image), except `notes`, whose result file is missing."""
    _import(corpus_root, NAMES)
    activated("papers")
    statuses = dict(
        zip(
            NAMES,
            (TaskStatus.NO_PROBLEM, TaskStatus.WARNING, TaskStatus.ERROR, TaskStatus.NO_PROBLEM, TaskStatus.FATAL),
            strict=True,
        )
    )
    for task in Task.objects.filter(corpus__name="papers", service__name="tex_to_html").select_related("document"):
        name = task.document.name
        Task.objects.filter(pk=task.pk).update(status=statuses[name])
        if name == "notes":
            continue
        path = result_path(Path(django_settings.RESULTS_DIR), task.corpus_id, task.service_id, task.pk)
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as result:
            result.writestr(f"{name}.html", f"<html><body>{name} " + "text " * 200 + "</body></html>")
            result.writestr("x.png", b"\x89PNG" + bytes(range(256)) * 4, compress_type=zipfile.ZIP_STORED)
    return statuses


def _problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["detail"]
    if field is not None:
        assert field in body["errors"], body
    return body


def _export(api: Any, **body: Any) -> dict[str, Any]:
    """POST the export, run its job here (as the Celery worker would) and return the job's record."""
    response = api.post(EXPORT, body, format="json")
    assert response.status_code == 202, response.content
    job = response.json()
    assert job["kind"] == "dataset_export" and job["state"] == "queued"
    job_run(job["uuid"])
    return api.get(f"/api/jobs/{job['uuid']}").json()


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None  # every member's CRC holds
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _manifest(directory: Path) -> dict[str, Any]:
    return json.loads((directory / "manifest.json").read_text())


# --- the request -----------------------------------------------------------------------------------------


def test_invalid_requests_answer_their_problem_and_start_no_job(authed, converted, roots, tmp_path) -> None:
    jobs = Job.objects.count()
    good = {"group_by": "severity", "severities": ["error"]}
    _problem(APIClient().post(EXPORT, good, format="json"), 401)
    _problem(APIClient().post(EXPORT, good, format="json", HTTP_X_SERVICE_TOKEN="wrong"), 401)
    from services.actions import service_register

    service_register(name="tex_to_html_idle", actor="tester")
    for path in (
        "/api/corpora/nope/services/tex_to_html/export-dataset",
        "/api/corpora/papers/services/nope/export-dataset",
        "/api/corpora/papers/services/tex_to_html_idle/export-dataset",
    ):
        _problem(authed.post(path, good, format="json"), 404)
    _problem(authed.post(EXPORT, {**good, "group_by": "year"}, format="json"), 422, "group_by")
    for severities in (["error", "great"], [], ["info"]):
        _problem(authed.post(EXPORT, {**good, "severities": severities}, format="json"), 422, "severities")
    # A missing field or one of the wrong type is malformed (400), as on every endpoint.
    _problem(authed.post(EXPORT, {"severities": ["error"]}, format="json"), 400, "group_by")
    _problem(authed.post(EXPORT, {**good, "severities": "error"}, format="json"), 400, "severities")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (roots / "escape").symlink_to(outside)
    for out in ("/tmp/x", str(roots / "x"), "..", "../x", "a/../../x", "a/b", "escape", ".hidden", " x"):
        body = _problem(authed.post(EXPORT, {**good, "out": out}, format="json"), 422, "out")
        assert "refused" in body["detail"] or body["errors"]["out"], out
    assert Job.objects.count() == jobs
    assert list(outside.iterdir()) == [] and sorted(p.name for p in roots.iterdir()) == ["escape"]


def test_months_come_from_arxiv_identifiers_in_the_name_or_entry() -> None:
    from django.db import connection

    cases = {
        ("2401.00001", ""): "2024-01",
        ("2401.12345v2", ""): "2024-01",
        ("0704.0001", ""): "2007-04",
        ("math0601001", ""): "2006-01",
        ("hep-th9912001", ""): "1999-12",
        ("math.AG0601001", ""): "2006-01",
        ("paper", "math/0601001.tar.gz"): "2006-01",
        ("paper", "2312.00009.tar.gz"): "2023-12",
        ("2413.00001", ""): "unknown",  # no month 13
        ("notes", "notes.tex"): "unknown",
    }
    with connection.cursor() as cursor:
        for (name, entry), month in cases.items():
            sql = export_job.MONTH_SQL.replace("d.name", "%(name)s").replace("d.entry", "%(entry)s")
            cursor.execute(f"SELECT {sql}", {"name": name, "entry": entry})
            assert cursor.fetchone()[0] == month, (name, entry)


# --- the archives ----------------------------------------------------------------------------------------


def test_an_export_by_month_writes_one_archive_per_month_and_the_manifest_lists_every_document(
    authed, converted, roots
) -> None:
    job = _export(authed, group_by="month", severities=["no_problem", "warning", "error", "fatal"], out="by-month")
    assert job["state"] == "succeeded", job
    assert job["progress"]["current"] == job["progress"]["total"] == 5
    directory = roots / "by-month"
    assert sorted(p.name for p in directory.glob("*.zip")) == ["1999-12.zip", "2006-01.zip", "2024-01.zip",
                                                               "unknown.zip"]  # fmt: skip
    assert not list(directory.glob("*.part")) and not list(directory.glob(".*.part"))
    assert set(_members(directory / "2024-01.zip")) == {
        "2401.00001/2401.00001.html", "2401.00001/x.png", "2401.00002/2401.00002.html", "2401.00002/x.png",
    }  # fmt: skip
    assert set(_members(directory / "2006-01.zip")) == {"math0601001/math0601001.html", "math0601001/x.png"}
    assert _members(directory / "unknown.zip") == {}  # notes: its result file is missing
    html = _members(directory / "1999-12.zip")["hep-th9912001/hep-th9912001.html"]
    assert html.startswith(b"<html><body>hep-th9912001 ")
    manifest = _manifest(directory)
    assert (manifest["corpus"], manifest["service"], manifest["group_by"]) == ("papers", "tex_to_html", "month")
    assert manifest["severities"] == ["no_problem", "warning", "error", "fatal"]
    assert manifest["created_at"] and (manifest["documents"], manifest["missing"]) == (4, 1)
    archives = {a["name"]: a for a in manifest["archives"]}
    assert {name: a["documents"] for name, a in archives.items()} == {
        "1999-12.zip": 1, "2006-01.zip": 1, "2024-01.zip": 2, "unknown.zip": 0,
    }  # fmt: skip
    assert all(a["bytes"] == (directory / name).stat().st_size for name, a in archives.items())
    documents = {d["document"]: d for d in manifest["document_list"]}
    assert set(documents) == set(NAMES)
    assert documents["notes"] == {"document": "notes", "status": "fatal", "archive": "unknown.zip", "missing": True}
    assert documents["math0601001"] == {
        "document": "math0601001", "status": "error", "archive": "2006-01.zip", "missing": False,
    }  # fmt: skip


def test_an_export_by_severity_holds_exactly_the_chosen_severities(authed, converted, roots) -> None:
    job = _export(authed, group_by="severity", severities=["warning", "no_problem"], out="by-severity")
    assert job["state"] == "succeeded", job
    directory = roots / "by-severity"
    assert sorted(p.name for p in directory.glob("*.zip")) == ["no_problem.zip", "warning.zip"]
    assert {m.split("/")[0] for m in _members(directory / "no_problem.zip")} == {"2401.00001", "hep-th9912001"}
    assert {m.split("/")[0] for m in _members(directory / "warning.zip")} == {"2401.00002"}
    manifest = _manifest(directory)
    assert manifest["severities"] == ["no_problem", "warning"]  # in severity order, as asked
    assert {(d["document"], d["archive"]) for d in manifest["document_list"]} == {
        ("2401.00001", "no_problem.zip"), ("hep-th9912001", "no_problem.zip"), ("2401.00002", "warning.zip"),
    }  # fmt: skip

    one = _export(authed, group_by="none", severities=["fatal", "error"])
    assert one["state"] == "succeeded" and one["params"]["out"].startswith("papers-tex_to_html-")
    (archive,) = (roots / one["params"]["out"]).glob("*.zip")
    assert archive.name == "all.zip" and {m.split("/")[0] for m in _members(archive)} == {"math0601001"}


def test_a_second_request_on_an_export_directory_of_another_request_is_refused(authed, converted, roots) -> None:
    assert _export(authed, group_by="none", severities=["error"], out="mine")["state"] == "succeeded"
    jobs = Job.objects.count()
    _problem(authed.post(EXPORT, {"group_by": "month", "severities": ["error"], "out": "mine"}, format="json"), 409)
    assert Job.objects.count() == jobs


# --- interrupted, then run again -------------------------------------------------------------------------


@pytest.fixture
def interrupt_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], None]]:
    """Make the export's writer die at its n-th document (as a killed process would stop: no clean-up)."""
    original = export_job._ArchiveWriter.add

    def arm(n: int) -> None:
        calls = {"count": 0}

        def add(self: export_job._ArchiveWriter, *args: Any) -> None:
            calls["count"] += 1
            if calls["count"] == n:
                raise SystemExit("killed")  # not an Exception: nothing in the writer may catch it
            original(self, *args)

        monkeypatch.setattr(export_job._ArchiveWriter, "add", add)

    yield arm
    monkeypatch.setattr(export_job._ArchiveWriter, "add", original)


def test_an_export_interrupted_midway_leaves_no_complete_looking_half_archive_and_finishes_when_run_again(
    authed, converted, roots, interrupt_at, monkeypatch
) -> None:
    request = {"group_by": "month", "severities": ["no_problem", "warning", "error"], "out": "resumed"}
    interrupt_at(4)  # 2006-01 (1 doc), 1999-12 (1), then 2024-01: dies at its second document
    response = authed.post(EXPORT, request, format="json")
    assert response.status_code == 202
    with pytest.raises(SystemExit):
        job_run(response.json()["uuid"])
    directory = roots / "resumed"
    assert sorted(p.name for p in directory.glob("*.zip")) == ["1999-12.zip", "2006-01.zip"]
    assert (directory / ".2024-01.zip.part").exists()  # the half archive, under a name that is not an archive
    assert not (directory / "manifest.json").exists()
    assert authed.get("/api/exports").json() == []  # nothing finished to list
    kept = {name: (directory / name).stat() for name in ("1999-12.zip", "2006-01.zip")}

    monkeypatch.undo()
    job = _export(authed, **request)
    assert job["state"] == "succeeded", job
    assert sorted(p.name for p in directory.glob("*.zip")) == ["1999-12.zip", "2006-01.zip", "2024-01.zip"]
    assert not list(directory.glob(".*.part"))
    for name, stat in kept.items():  # kept as they were, not written again
        assert ((directory / name).stat().st_ino, (directory / name).stat().st_mtime_ns) == (
            stat.st_ino, stat.st_mtime_ns,
        )  # fmt: skip
    manifest = _manifest(directory)
    assert {d["document"] for d in manifest["document_list"]} == {"2401.00001", "2401.00002", "math0601001",
                                                                 "hep-th9912001"}  # fmt: skip
    assert {a["name"]: a["documents"] for a in manifest["archives"]} == {
        "1999-12.zip": 1, "2006-01.zip": 1, "2024-01.zip": 2,
    }  # fmt: skip
    assert {m.split("/")[0] for m in _members(directory / "2024-01.zip")} == {"2401.00001", "2401.00002"}


def test_an_export_run_again_after_the_tasks_changed_rewrites_its_archives(authed, converted, roots) -> None:
    request = {"group_by": "severity", "severities": ["no_problem", "warning"], "out": "changing"}
    assert _export(authed, **request)["state"] == "succeeded"
    Task.objects.filter(document__name="2401.00002").update(status=TaskStatus.NO_PROBLEM)
    assert _export(authed, **request)["state"] == "succeeded"
    directory = roots / "changing"
    assert sorted(p.name for p in directory.glob("*.zip")) == ["no_problem.zip"]
    assert {m.split("/")[0] for m in _members(directory / "no_problem.zip")} == {"2401.00001", "2401.00002",
                                                                                "hep-th9912001"}  # fmt: skip


# --- downloads and screens -------------------------------------------------------------------------------


def test_finished_exports_are_listed_and_downloaded_with_a_token_and_nothing_outside_the_root(
    authed, converted, roots, tmp_path
) -> None:
    api = APIClient()
    _export(authed, group_by="severity", severities=["warning"], out="listed")
    _problem(api.get("/api/exports"), 401)
    (listed,) = authed.get("/api/exports").json()
    assert (listed["out"], listed["documents"], listed["missing"]) == ("listed", 1, 0)
    assert "document_list" not in listed
    (archive,) = listed["archives"]
    assert archive["url"] == "/api/exports/listed/warning.zip"
    _problem(api.get(archive["url"]), 401)
    download = authed.get(archive["url"])
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    assert b"".join(download.streaming_content) == (roots / "listed" / "warning.zip").read_bytes()
    manifest = authed.get(listed["manifest_url"])
    assert json.loads(b"".join(manifest.streaming_content))["document_list"][0]["document"] == "2401.00002"
    secret = tmp_path / "secret.zip"
    secret.write_bytes(b"secret")
    (roots / "listed" / "link.zip").symlink_to(secret)
    (roots / "outside").symlink_to(tmp_path)
    for bad in ("listed/.plan.json", "listed/link.zip", "listed/.lock", "..%2Fsecret.zip/x", "outside/secret.zip",
                "listed/..%2F..%2Fsecret.zip", "nope/warning.zip"):  # fmt: skip
        _problem(authed.get(f"/api/exports/{bad}"), 404)


def test_the_export_form_starts_the_same_job_and_the_list_screen_shows_the_api_records(
    client, screen_client, authed, converted, roots
) -> None:
    page = screen_client.get("/reports/papers/tex_to_html")
    assert page.status_code == 200 and b'id="export"' in page.content
    jobs = Job.objects.count()
    refused = screen_client.post(
        "/corpora/papers/services/tex_to_html/export", {"group_by": "year", "severities": ["error"]}
    )
    assert refused.status_code == 422 and Job.objects.count() == jobs
    response = screen_client.post(
        "/corpora/papers/services/tex_to_html/export",
        {"group_by": "severity", "severities": ["no_problem", "warning"], "out": "from-screen"},
    )
    assert response.status_code == 302
    job = Job.objects.get(kind="dataset_export")
    assert response["Location"] == f"/jobs/{job.uuid}" and job.params["severities"] == ["no_problem", "warning"]
    assert job_run(job.pk) == "succeeded"
    from accounts.models import AuditEntry

    assert AuditEntry.objects.filter(action="corpus.export").count() == 2

    listing = screen_client.get("/exports")
    assert listing.status_code == 200
    assert listing.context["exports"] == authed.get("/api/exports").json()
    assert b"/exports/from-screen/no_problem.zip" in listing.content
    download = screen_client.get("/exports/from-screen/no_problem.zip")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == (roots / "from-screen" / "no_problem.zip").read_bytes()
    assert screen_client.get("/exports/from-screen/.plan.json").status_code == 404
    screen_client.post("/logout")
    assert client.get("/exports/from-screen/no_problem.zip").status_code == 302  # to the sign-in page
    assert client.get("/exports").status_code == 302


# --- with real conversions -------------------------------------------------------------------------------

CLEAN = "\\documentclass{article}\n\\begin{document}\nHello $x^2$.\n\\end{document}\n"
WARNING_TEX = "\\documentclass{article}\n\\begin{document}\nSee \\ref{sec:missing}.\n\\end{document}\n"
BROKEN = "\\documentclass{article}\n\\begin{document}\nAn \\undefinedmacro{} here.\n\\end{document}\n"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_with_real_conversions_the_archives_hold_the_html_of_exactly_the_manifests_documents(
    authed, corpus_root, roots, tmp_path, purge_broker, process_tmpdir
) -> None:
    from tests.dispatcher.harness import DispatcherProcess, process_stop, wait_for, worker_process

    if not shutil.which("latexmlc"):
        pytest.fail("latexmlc is not installed: apt-get install latexml")
    texts = {"2401.00001": CLEAN, "math0601001": WARNING_TEX, "2402.00002": BROKEN}
    _import(corpus_root, tuple(texts), texts)
    activated("papers")
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(django_settings.RESULTS_DIR), CORPUS_ROOTS=str(corpus_root), CONVERSION_SANDBOX="bwrap"
    ).start()
    worker = worker_process(dispatcher, scratch=process_tmpdir, service="tex_to_html")
    try:

        def done() -> dict[str, int] | None:
            counts = authed.get("/api/reports/papers/tex_to_html").json()["counts"]
            return counts if counts["in_progress"] == 0 else None

        counts = wait_for(done, timeout=240, interval=0.2, message="the three conversions")
    finally:
        process_stop(worker)
        dispatcher.kill()
    assert (counts["no_problem"], counts["warning"], counts["error"]) == (1, 1, 1), counts

    severities = ["no_problem", "warning", "error"]
    for group_by, expected in (
        ("severity", {"no_problem.zip": {"2401.00001"}, "warning.zip": {"math0601001"}, "error.zip": {"2402.00002"}}),
        ("month", {"2024-01.zip": {"2401.00001"}, "2006-01.zip": {"math0601001"}, "2024-02.zip": {"2402.00002"}}),
    ):
        job = _export(authed, group_by=group_by, severities=severities, out=f"real-{group_by}")
        assert job["state"] == "succeeded", job
        directory = roots / f"real-{group_by}"
        manifest = _manifest(directory)
        listed: dict[str, set[str]] = {}
        for document in manifest["document_list"]:
            assert not document["missing"], document
            listed.setdefault(document["archive"], set()).add(document["document"])
        assert listed == expected
        for archive in manifest["archives"]:
            members = _members(directory / archive["name"])
            html = {m.split("/")[0]: body for m, body in members.items() if m.endswith(".html")}
            assert set(html) == expected[archive["name"]] == {m.split("/")[0] for m in members}
            assert all(b"<html" in body and b"ltx_document" in body for body in html.values())
            assert (
                archive["documents"] == len(html) and archive["bytes"] == (directory / archive["name"]).stat().st_size
            )
    clean = _members(roots / "real-month" / "2024-01.zip")
    assert any(b"x</mi>" in body or b"x^{2}" in body for body in clean.values())  # the converted formula


def _result_file(name: str) -> Path:
    task = Task.objects.get(corpus__name="papers", service__name="tex_to_html", document__name=name)
    return result_path(Path(django_settings.RESULTS_DIR), task.corpus_id, task.service_id, task.pk)


def test_unusual_result_archives_are_copied_and_broken_ones_listed_as_missing(authed, converted, roots) -> None:
    with zipfile.ZipFile(_result_file("2401.00002"), "w") as result:  # read through zipfile, not the fast path
        result.writestr("page.html", "<html>lzma</html>", compress_type=zipfile.ZIP_LZMA)
        result.writestr("sub/", "")
        result.writestr("../escape.html", "<html>out</html>")
        result.comment = b"a comment"
    good = _result_file("2401.00001").read_bytes()
    _result_file("hep-th9912001").write_bytes(good[: len(good) // 2])  # truncated: not a ZIP any more
    job = _export(authed, group_by="none", severities=["no_problem", "warning"], out="odd")
    assert job["state"] == "succeeded", job
    members = _members(roots / "odd" / "all.zip")
    assert members["2401.00002/page.html"] == b"<html>lzma</html>"
    assert set(members) == {"2401.00001/2401.00001.html", "2401.00001/x.png", "2401.00002/page.html"}
    manifest = _manifest(roots / "odd")
    assert {d["document"]: d["missing"] for d in manifest["document_list"]} == {
        "2401.00001": False, "2401.00002": False, "hep-th9912001": True,
    }  # fmt: skip
    assert (manifest["documents"], manifest["missing"]) == (2, 1)


@pytest.mark.django_db(False)
def test_the_archive_writer_writes_zip64_end_records_past_65535_members_and_cuts_back_a_broken_document(
    tmp_path,
) -> None:
    source = tmp_path / "result.zip"
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as result:
        result.writestr("é.html", "<html>accent</html>")  # a cp437/utf-8 name
    truncated = tmp_path / "truncated.zip"
    with zipfile.ZipFile(truncated, "w", zipfile.ZIP_STORED) as result:
        result.writestr("a.html", "x" * 5000)
        result.writestr("b.html", "y" * 5000)
    # b.html's central directory entry claims 1000 bytes more than its body holds: the copy breaks after
    # a.html was written (and after part of b.html), and the document must be cut back whole.
    data = bytearray(truncated.read_bytes())
    entry = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02") + 4)
    for field in (20, 24):
        size = struct.unpack_from("<L", data, entry + field)[0]
        struct.pack_into("<L", data, entry + field, size + 1000)
    truncated.write_bytes(bytes(data))
    target = ZipOut(tmp_path / "out.zip")
    for index in range(70_000):
        result_copy(str(source), target, f"d{index}/")
    mark = target.mark()
    with pytest.raises(zipfile.BadZipFile, match="shorter"):
        result_copy(str(truncated), target, "broken/")
    target.rollback(mark)
    result_copy(str(source), target, "ünïcode/")
    target.close()
    with zipfile.ZipFile(tmp_path / "out.zip") as archive:
        names = archive.namelist()
        assert len(names) == 70_001 and names[0] == "d0/é.html" and names[-1] == "ünïcode/é.html"
        assert not any(name.startswith("broken/") for name in names)
        assert archive.read("d69999/é.html") == archive.read("ünïcode/é.html") == b"<html>accent</html>"
        assert archive.testzip() is None
    assert subprocess.run(["unzip", "-tq", str(tmp_path / "out.zip")], capture_output=True).returncode == 0


def test_an_export_already_being_written_is_not_written_twice_at_once(authed, converted, roots) -> None:
    import fcntl

    directory = roots / "busy"
    directory.mkdir()
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held as a running export holds it
        job = _export(authed, group_by="none", severities=["error"], out="busy")
    assert job["state"] == "failed" and "another export is writing busy" in job["message"]
    assert not list(directory.glob("*.zip"))
    assert _export(authed, group_by="none", severities=["error"], out="busy")["state"] == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_an_export_process_killed_midway_leaves_no_half_archive_and_the_same_request_finishes_it(
    authed, converted, roots
) -> None:
    """A real SIGKILL of the process running the job, while it copies a document of its third archive (that
    document's result is a FIFO nobody writes, so the copy blocks there); then the same request again."""
    import os
    import signal
    import sys

    from tests.support import PROJECT_DIR, child_env, wait_until

    request = {"group_by": "month", "severities": ["no_problem", "warning", "error"], "out": "killed"}
    task = Task.objects.select_related("document").get(document__name="2401.00002", service__name="tex_to_html")
    result = result_path(Path(django_settings.RESULTS_DIR), task.corpus_id, task.service_id, task.pk)
    saved = result.read_bytes()
    result.unlink()
    os.mkfifo(result)
    response = authed.post(EXPORT, request, format="json")
    assert response.status_code == 202
    code = f"import django; django.setup(); from jobs.runner import job_run; job_run({response.json()['uuid']!r})"
    env = child_env(EXPORT_ROOT=str(roots), RESULTS_DIR=str(django_settings.RESULTS_DIR))
    child = subprocess.Popen([sys.executable, "-c", code], cwd=PROJECT_DIR, env=env, start_new_session=True)
    directory = roots / "killed"
    try:
        wait_until(
            lambda: (directory / ".2024-01.zip.part").exists() and (directory / "1999-12.zip").exists(),
            timeout=60, message="the export to block inside its third archive",
        )  # fmt: skip
        assert child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert sorted(p.name for p in directory.glob("*.zip")) == ["1999-12.zip", "2006-01.zip"]
    assert not (directory / "manifest.json").exists() and authed.get("/api/exports").json() == []

    result.unlink()
    result.write_bytes(saved)
    job = _export(authed, **request)
    assert job["state"] == "succeeded", job
    assert sorted(p.name for p in directory.glob("*.zip")) == ["1999-12.zip", "2006-01.zip", "2024-01.zip"]
    assert not list(directory.glob(".*.part"))
    assert {m.split("/")[0] for m in _members(directory / "2024-01.zip")} == {"2401.00001", "2401.00002"}
    assert {d["document"] for d in _manifest(directory)["document_list"]} == {
        "2401.00001", "2401.00002", "math0601001", "hep-th9912001",
    }  # fmt: skip
