"""Import and extend through the API, including every kind of bad input an operator can send."""

from __future__ import annotations

import contextlib
import gzip
import os
import threading

import pytest
from django.db import connection

from corpora.models import Corpus, Document, LogMessage, Task
from jobs.models import Job
from jobs.runner import job_run
from services.models import Service
from tests.corpora.helpers import activated, imported, make_corpus_dir
from tests.support import TEX_DOCUMENT, TEX_FRAGMENT, write_targz, write_tex, write_zip

pytestmark = pytest.mark.django_db


def _import(authed, name: str, path: str) -> dict:
    response = authed.post("/api/corpora", {"name": name, "path": path}, format="json")
    return response


def _run(body: dict) -> Job:
    job_run(body["uuid"])
    return Job.objects.get(pk=body["uuid"])


def test_an_import_records_one_document_and_one_import_task_per_entry(authed, corpus_root):
    directory = corpus_root / "mixed"
    write_tex(directory / "lone.tex")
    write_tex(directory / "dir" / "main.tex")
    write_tex(directory / "dir" / "part.tex", TEX_FRAGMENT)
    write_zip(directory / "1234.5678.zip", {"a/paper.tex": TEX_DOCUMENT})
    write_targz(directory / "hep-th0001.tar.gz", {"ms.tex": TEX_DOCUMENT, "x.tex": TEX_FRAGMENT})
    write_zip(directory / "figs.zip", {"f.png": "png"})
    (directory / "empty").mkdir()
    (directory / ".hidden.tex").write_text(TEX_DOCUMENT)
    response = _import(authed, "mixed", str(directory))
    assert response.status_code == 202 and response.json()["kind"] == "corpus_import"
    job = _run(response.json())
    assert job.state == "succeeded", job.message
    assert (job.progress_current, job.progress_total) == (6, 6)  # the hidden entry is left out
    docs = {d.name: d for d in Document.objects.filter(corpus__name="mixed")}
    assert set(docs) == {"lone", "dir", "1234.5678", "hep-th0001", "figs", "empty"}
    assert docs["dir"].main_file == "main.tex" and docs["1234.5678"].main_file == "a/paper.tex"
    statuses = dict(Task.objects.filter(corpus__name="mixed").values_list("document__name", "status"))
    assert statuses == {"lone": -1, "dir": -1, "1234.5678": -1, "hep-th0001": -1, "figs": -5, "empty": -5}
    messages = {(m.task.document.name, m.severity, m.category, m.what) for m in LogMessage.objects.all()}
    assert messages == {("figs", "fatal", "invalid", "archive"), ("empty", "fatal", "invalid", "no_main_file")}
    assert set(LogMessage.objects.values_list("task_status", flat=True)) == {-5}  # the invalid tasks' status
    corpus = authed.get("/api/corpora/mixed").json()
    assert corpus["state"] == "ready" and corpus["documents"] == 6
    assert corpus["services"][0]["name"] == "import"
    assert corpus["services"][0]["counts"] == {
        "total": 6, "in_progress": 0, "todo": 0, "queued": 0, "no_problem": 4, "warning": 0,
        "error": 0, "fatal": 0, "invalid": 2, "blocked": 0,
    }  # fmt: skip


def test_a_taken_name_is_409_and_creates_nothing(authed, corpus_root):
    imported(corpus_root, "taken")
    other = make_corpus_dir(corpus_root, "other")
    response = _import(authed, "taken", str(other))
    assert response.status_code == 409
    assert Corpus.objects.count() == 1 and Job.objects.filter(kind="corpus_import").count() == 1


@pytest.mark.parametrize(
    "name",
    ["a/b", "../x", "tab\there", "nul\x00", "line\nbreak", "x" * 300, "", " lead", "ünïcode", "-dash-first", "new"],
)
def test_bad_names_are_400_with_a_field_error(authed, corpus_root, name):
    response = _import(authed, name, str(make_corpus_dir(corpus_root, "d")))
    assert response.status_code == 400, response.json()
    assert "name" in response.json()["errors"]
    assert not Corpus.objects.exists()


def test_paths_outside_the_roots_are_422(authed, corpus_root, tmp_path):
    outside = tmp_path / "outside"
    make_corpus_dir(tmp_path, "outside")
    (corpus_root / "link").symlink_to(outside)
    for path in (str(outside), str(corpus_root / ".." / "outside"), str(corpus_root / "link"), "/etc", "../outside"):
        response = _import(authed, "c", path)
        assert response.status_code == 422, (path, response.json())
        assert response.json()["errors"]["path"] == ["outside the corpus roots"]
    assert not Corpus.objects.exists()


def test_a_corpus_root_itself_is_refused_with_422(authed, corpus_root, settings, tmp_path):
    make_corpus_dir(corpus_root, "inside")
    second = (tmp_path / "second").resolve()
    second.mkdir()
    settings.CORPUS_ROOTS = [corpus_root, second]
    (corpus_root / "up").symlink_to(corpus_root)
    for path in (".", "", str(corpus_root), f"{corpus_root}/", str(corpus_root / "inside" / ".."), "up", str(second)):
        response = _import(authed, "c", path or "./")
        assert response.status_code == 422, (path, response.json())
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["errors"]["path"] == ["a corpus root itself"]
    assert not Corpus.objects.exists()


def test_one_corrupt_gz_among_valid_entries_is_an_invalid_document_on_import_and_on_extend(authed, corpus_root):
    directory = make_corpus_dir(corpus_root, "mixed", documents=2)
    damaged = bytearray(gzip.compress((TEX_DOCUMENT * 200).encode()))
    damaged[30:40] = b"\xff" * 10  # zlib.error inside the deflate stream
    (directory / "broken.gz").write_bytes(bytes(damaged))
    job = _run(_import(authed, "mixed", str(directory)).json())
    assert job.state == "succeeded" and job.result["documents"] == 3 and job.result["invalid"] == 1
    message = LogMessage.objects.get(task__document__name="broken")
    assert (message.category, message.what, message.task_status) == ("invalid", "archive", -5)
    assert "zlib" in message.details or "decompress" in message.details

    activated("mixed")
    (directory / "later.gz").write_bytes(bytes(damaged))
    write_tex(directory / "later.tex")
    extended = _run(authed.post("/api/corpora/mixed/extend").json())
    assert extended.state == "succeeded" and extended.result["documents"] == 2 and extended.result["todo_tasks"] == 1
    assert Document.objects.filter(corpus__name="mixed").count() == 5
    later = LogMessage.objects.get(task__document__entry="later.gz")
    assert (later.category, later.what) == ("invalid", "archive")


def test_a_path_that_is_not_a_readable_directory_is_422(authed, corpus_root):
    write_tex(corpus_root / "file.tex")
    for path in (str(corpus_root / "missing"), str(corpus_root / "file.tex"), ""):
        response = _import(authed, "c", path)
        assert response.status_code in (400, 422), path
        assert "path" in response.json()["errors"]
    assert not Corpus.objects.exists()


def test_a_relative_path_is_taken_inside_the_first_root(authed, corpus_root):
    make_corpus_dir(corpus_root, "rel")
    response = _import(authed, "rel", "rel")
    assert response.status_code == 202
    assert _run(response.json()).state == "succeeded"
    assert Corpus.objects.get(name="rel").documents.count() == 3


def test_an_empty_directory_imports_as_an_empty_corpus(authed, corpus_root):
    (corpus_root / "nothing").mkdir()
    job = _run(_import(authed, "nothing", str(corpus_root / "nothing")).json())
    assert job.state == "succeeded" and job.result["documents"] == 0
    assert authed.get("/api/corpora/nothing").json()["documents"] == 0


def test_entries_that_escape_or_cannot_be_read_become_invalid_documents(authed, corpus_root, tmp_path):
    directory = make_corpus_dir(corpus_root, "tricky", documents=1)
    write_tex(tmp_path / "secret" / "s.tex")
    (directory / "escape").symlink_to(tmp_path / "secret")
    (directory / "dangling.tex").symlink_to(directory / "nowhere.tex")
    os.mkfifo(directory / "pipe.tex")
    write_zip(directory / "slip.zip", {"../../evil.tex": TEX_DOCUMENT})
    (directory / "corrupt.tar.gz").write_bytes(b"\x1f\x8b\x08 definitely not gzip")
    job = _run(_import(authed, "tricky", str(directory)).json())
    assert job.state == "succeeded"
    whats = dict(LogMessage.objects.values_list("task__document__name", "what"))
    assert whats == {
        "escape": "unsafe_path", "dangling": "unreadable", "pipe": "unsupported",
        "slip": "unsafe_archive", "corrupt": "archive",
    }  # fmt: skip
    assert not (tmp_path / "evil.tex").exists()


def test_a_failed_import_leaves_no_half_created_corpus(authed, corpus_root):
    import shutil

    directory = make_corpus_dir(corpus_root, "vanishing")
    body = _import(authed, "vanishing", str(directory)).json()
    shutil.rmtree(directory)
    job = _run(body)
    assert job.state == "failed" and "no longer a directory" in job.message
    assert not Corpus.objects.filter(name="vanishing").exists()
    assert not Document.objects.exists() and not Task.objects.exists()
    make_corpus_dir(corpus_root, "vanishing")
    assert _import(authed, "vanishing", str(corpus_root / "vanishing")).status_code == 202


def test_short_name_collisions_keep_the_full_entry_name(authed, corpus_root):
    directory = corpus_root / "dups"
    write_tex(directory / "paper.tex")
    write_zip(directory / "paper.zip", {"paper.tex": TEX_DOCUMENT})
    _run(_import(authed, "dups", str(directory)).json())
    assert set(Document.objects.values_list("name", flat=True)) == {"paper", "paper.zip"}


@pytest.mark.django_db(transaction=True)
def test_two_imports_racing_for_one_name_give_one_corpus_and_one_409(api, corpus_root):
    from accounts.actions import token_create

    _, raw = token_create(actor="racer", created_by="pytest")
    directory = make_corpus_dir(corpus_root, "race")
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def post() -> None:
        from rest_framework.test import APIClient

        client = APIClient()
        barrier.wait()
        codes.append(client.post("/api/corpora", {"name": "race", "path": str(directory)}, format="json",
                                 HTTP_X_SERVICE_TOKEN=raw).status_code)  # fmt: skip
        connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [202, 409]
    assert Corpus.objects.filter(name="race").count() == 1
    assert Job.objects.filter(kind="corpus_import").count() == 1


def test_extend_adds_only_new_entries_with_todo_tasks_and_keeps_results(authed, corpus_root):
    imported(corpus_root, "grow", documents=2)
    activated("grow")
    Task.objects.filter(corpus__name="grow", service__name="tex_to_html").update(status=-2)
    write_tex(corpus_root / "grow" / "new1.tex")
    write_zip(corpus_root / "grow" / "new2.zip", {"x.png": "no tex"})
    response = authed.post("/api/corpora/grow/extend")
    assert response.status_code == 202
    job = _run(response.json())
    assert job.state == "succeeded" and job.result["documents"] == 2 and job.result["todo_tasks"] == 1
    counts = {s["name"]: s["counts"] for s in authed.get("/api/corpora/grow").json()["services"]}
    assert counts["tex_to_html"]["warning"] == 2 and counts["tex_to_html"]["todo"] == 1
    assert counts["import"]["no_problem"] == 3 and counts["import"]["invalid"] == 1
    again = _run(authed.post("/api/corpora/grow/extend").json())
    assert again.result["documents"] == 0


def test_extend_of_an_unknown_corpus_is_404_and_of_an_importing_one_409(authed, corpus_root):
    assert authed.post("/api/corpora/nope/extend").status_code == 404
    _import(authed, "busy", str(make_corpus_dir(corpus_root, "busy")))
    assert authed.post("/api/corpora/busy/extend").status_code == 409


def test_import_and_extend_are_token_gated_and_journaled(authed, corpus_root):
    from rest_framework.test import APIClient

    from accounts.models import AuditEntry

    directory = make_corpus_dir(corpus_root, "gated")
    assert APIClient().post("/api/corpora", {"name": "gated", "path": str(directory)}, format="json").status_code == 401
    _import(authed, "gated", str(directory))
    _import(authed, "gated", str(directory))
    outcomes = list(AuditEntry.objects.filter(action="corpus.import").order_by("id").values_list("target", "outcome"))
    assert outcomes == [("gated", "ok"), ("gated", "409 Conflict")]


def test_the_import_service_exists_and_is_protected(db):
    assert set(Service.objects.values_list("name", flat=True)) >= {"init", "import"}


def test_unusable_paths_are_422_not_a_crash(authed, corpus_root):
    (corpus_root / "loop").symlink_to(corpus_root / "loop")
    for path in (str(corpus_root / ("x" * 5000)), str(corpus_root / "loop"), "a\x00b"):
        response = _import(authed, "c", path)
        assert response.status_code in (400, 422), (path[:40], response.json())
    assert not Corpus.objects.exists()


def test_an_import_called_directly_is_journaled_as_from_the_api(corpus_root):
    from accounts.models import AuditEntry
    from config.errors import Conflict
    from corpora.actions.corpora import corpus_import

    directory = make_corpus_dir(corpus_root, "direct")
    corpus_import(name="direct", path=str(directory), actor="shell", send=False)
    with pytest.raises(Conflict):
        corpus_import(name="direct", path=str(directory), actor="shell", send=False)
    rows = AuditEntry.objects.filter(actor="shell").order_by("id").values_list("action", "target", "outcome", "params")
    assert list(rows) == [
        ("corpus.import", "direct", "ok", {"path": str(directory)}),
        ("corpus.import", "direct", "409 Conflict", {"path": str(directory)}),
    ]


def _gz(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()))


def test_arxiv_month_directories_import_each_archive_as_a_document_named_by_its_id(authed, corpus_root):
    """arXiv's layout, YYMM/<id>.gz: each month directory is a folder of documents. A four-digit directory
    that holds a .tex file of its own (or no archive) is still one document."""
    directory = corpus_root / "arxiv"
    _gz(directory / "1501" / "1501.00001.gz", TEX_DOCUMENT)  # a gzipped .tex
    (directory / "9912").mkdir(parents=True)
    write_targz(directory / "1501" / "1501.00002.gz", {"ms.tex": TEX_DOCUMENT, "x.tex": TEX_FRAGMENT})
    (directory / "1501" / "1501.00003.gz").write_bytes(b"not gzip at all")
    write_targz(directory / "9912" / "hep-th9912001.tar.gz", {"paper.tex": TEX_DOCUMENT})
    (directory / "9912" / ".listing").write_text("hidden")
    write_tex(directory / "2001" / "main.tex")  # a document directory with a four-digit name
    (directory / "2002").mkdir()  # empty: no archive, so one (invalid) document
    write_tex(directory / "lone.tex")
    job = _run(_import(authed, "arxiv", str(directory)).json())
    assert job.state == "succeeded", job.message
    docs = {d.name: (d.entry, d.kind, d.main_file) for d in Document.objects.filter(corpus__name="arxiv")}
    assert docs == {
        "1501.00001": ("1501/1501.00001.gz", "gz", "1501.00001.tex"),
        "1501.00002": ("1501/1501.00002.gz", "gz", "ms.tex"),
        "1501.00003": ("1501/1501.00003.gz", "gz", ""),
        "hep-th9912001": ("9912/hep-th9912001.tar.gz", "tar.gz", "paper.tex"),
        "2001": ("2001", "dir", "main.tex"),
        "2002": ("2002", "dir", ""),
        "lone": ("lone.tex", "tex", "lone.tex"),
    }
    statuses = dict(Task.objects.filter(corpus__name="arxiv").values_list("document__name", "status"))
    assert [name for name, status in statuses.items() if status == -5] in (
        ["1501.00003", "2002"], ["2002", "1501.00003"]
    )  # fmt: skip
    # Extend finds a new paper of a known month and nothing else.
    _gz(directory / "1501" / "1501.00004.gz", TEX_DOCUMENT)
    extended = authed.post("/api/corpora/arxiv/extend", {}, format="json")
    assert extended.status_code == 202, extended.content
    job = _run(extended.json())
    assert job.state == "succeeded", job.message
    assert job.result["entries_seen"] == 1 and job.result["documents"] == 1
    assert Document.objects.get(corpus__name="arxiv", name="1501.00004").entry == "1501/1501.00004.gz"


def test_a_month_entry_packs_as_its_file_name_for_the_worker(corpus_root):
    import io
    import zipfile

    from conversion.archive import inspect_entry, pack_entry

    directory = corpus_root / "packed"
    _gz(directory / "1501" / "1501.00001.gz", TEX_DOCUMENT)
    write_tex(directory / "1502" / "1502.00007.tex")
    _gz(directory / "1502" / "1502.00008.gz", TEX_DOCUMENT)
    for entry, member in (("1501/1501.00001.gz", "1501.00001.tex"), ("1502/1502.00007.tex", "1502.00007.tex")):
        found = inspect_entry(directory / entry, entry)
        payload = pack_entry(directory / entry, found.kind, entry)
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            assert archive.namelist() == [member]
            assert archive.read(member).decode() == TEX_DOCUMENT
        assert found.main_file == member


def test_many_entries_are_inspected_in_processes_of_their_own_with_the_same_result(corpus_root):
    """Above the chunk size the inspection runs in `python -m conversion.inspector` processes, in order,
    with problems and confinement to the roots exactly as in this process."""
    import psutil

    from corpora.scan import entry_names, scan

    directory = corpus_root / "many"
    for index in range(7):
        _gz(directory / "1501" / f"1501.{index:05d}.gz", TEX_DOCUMENT)
    (directory / "1501" / "1501.99999.gz").write_bytes(b"broken")
    write_tex(directory / "doc" / "main.tex")
    (directory / "out.tex").symlink_to(corpus_root.parent / "elsewhere.tex")
    names = entry_names(directory)
    progress: list[tuple[int, int]] = []
    here = list(scan(directory, names, lambda done, total: None))
    children: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        me = psutil.Process()
        while not stop.is_set():
            for child in me.children():
                with contextlib.suppress(psutil.Error):  # one that ended meanwhile
                    if "conversion.inspector" in child.cmdline():
                        children.add(child.pid)
            stop.wait(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        apart = list(scan(directory, names, lambda done, total: progress.append((done, total)), chunk=3))
    finally:
        stop.set()
        watcher.join()
    assert apart == here
    assert [entry.entry for entry in apart] == names and len(names) == 10
    assert {entry.name: entry.problem for entry in apart if entry.problem} == {
        "1501.99999": "archive",
        "out": "unsafe_path",
    }
    assert progress == [(3, 10), (6, 10), (9, 10), (10, 10)]
    assert children, "no inspector process was seen"


def test_the_inspection_runs_more_processes_at_once_than_the_machine_has_cores(corpus_root):
    """An entry that is not in the page cache waits on the disk for most of its inspection: chunks are
    inspected by four processes a core at once (at most 32), not one a core (bench/README.md, "Corpora")."""
    import psutil

    from corpora.scan import INSPECT_PROCESSES, entry_names, scan

    cores = os.cpu_count() or 1
    assert min(4 * cores, 32) == INSPECT_PROCESSES
    directory = corpus_root / "wide"
    for index in range(INSPECT_PROCESSES):
        write_tex(directory / f"paper{index:03d}.tex")
    names = entry_names(directory)
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        me = psutil.Process()
        while not stop.is_set():
            running = 0
            for child in me.children():
                with contextlib.suppress(psutil.Error):  # one that ended meanwhile
                    running += "conversion.inspector" in child.cmdline()
            peak = max(peak, running)
            stop.wait(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        entries = list(scan(directory, names, lambda done, total: None, chunk=1))
    finally:
        stop.set()
        watcher.join()
    assert [entry.entry for entry in entries] == names and not any(entry.problem for entry in entries)
    # Each process lives for its interpreter's start (~60 ms): those started together overlap.
    assert peak > INSPECT_PROCESSES // 2, f"at most {peak} of {INSPECT_PROCESSES} inspectors ran at once"
