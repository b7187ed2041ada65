"""Packing payloads in the real dispatcher process over real ZeroMQ sockets: entries read at hand-out time
are confined to the corpus roots, refused entries make their task invalid at once, and packing a huge
entry does not hold up the other workers."""

from __future__ import annotations

import io
import shutil
import uuid
import zipfile

import pytest

from corpora.actions.corpora import corpus_import
from corpora.models import LogMessage, Task
from dispatcher.server import INLINE_PACK_BYTES
from jobs.runner import job_run
from tests.corpora.helpers import activated, make_corpus_dir
from tests.dispatcher.harness import FakeWorker, wait_for
from tests.support import TEX_DOCUMENT, write_tex, write_zero_bomb

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _contents(payload: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        return b"".join(archive.read(name) for name in archive.namelist())


def _message(task: Task) -> tuple[str, str, str, int]:
    message = LogMessage.objects.get(task_id=task.pk)
    return message.severity, message.category, message.what, message.task_status


def test_entries_swapped_for_links_out_of_the_roots_are_invalid_and_never_sent(
    corpus_root, tmp_path, dispatcher, client
):
    directory = make_corpus_dir(corpus_root, "demo", documents=3)
    write_tex(directory / "folder" / "main.tex")
    job = corpus_import(name="demo", path=str(directory), actor="tester", send=False)
    job_run(job.pk)
    activated("demo")
    marker = f"OUTSIDE-THE-ROOTS-{uuid.uuid4().hex}"
    secret = TEX_DOCUMENT.replace("Hello", marker) + f"% {marker}\n"
    outside = write_tex(tmp_path / "outside" / "secret.tex", secret)
    write_tex(tmp_path / "outside" / "main.tex", secret)
    # After the import checked them: a lone .tex (packed on the loop) and a directory (on a packing thread).
    (directory / "doc1.tex").unlink()
    (directory / "doc1.tex").symlink_to(outside)
    shutil.rmtree(directory / "folder")
    (directory / "folder").symlink_to(tmp_path / "outside")
    tasks = Task.objects.filter(corpus__name="demo", service__name="tex_to_html")
    swapped = list(tasks.filter(document__name__in=["doc1", "folder"]))
    worker = FakeWorker(dispatcher())
    payloads: list[bytes] = []

    def handed_out_or_refused() -> bool:
        got = worker.ask("tex_to_html", timeout=5)
        if got is not None:
            payloads.append(got[1])
        return len(payloads) == 2 and tasks.filter(status=-5).count() == 2

    wait_for(handed_out_or_refused, timeout=60, message="two tasks out and the swapped ones invalid")
    assert all(marker.encode() not in payload and marker.encode() not in _contents(payload) for payload in payloads)
    for task in swapped:
        assert _message(task) == ("fatal", "invalid", "unsafe_path", -5)
        assert Task.objects.get(pk=task.pk).attempts == 1  # invalid at once, not left to the reaper's retries
    assert worker.ask("tex_to_html", timeout=5) is None
    for name in ("doc1", "folder"):
        page = client.get(f"/corpus/demo/tex_to_html/document/{name}")
        assert page.status_code == 200 and marker not in page.content.decode()
        assert "unsafe_path" in page.content.decode()
        assert client.get(f"/corpus/demo/tex_to_html/document/{name}/html").status_code == 404
    worker.close()


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def test_a_huge_entry_is_packed_beside_the_loop_and_made_invalid_at_the_size_limit(corpus_root, dispatcher):
    directory = corpus_root / "bombs"
    directory.mkdir()
    write_zero_bomb(directory / "a_bomb.tar.gz", 800 * 1024 * 1024)  # about 3.5 MB on disk
    write_tex(directory / "b_small.tex")
    write_tex(directory / "c_small.tex")
    job = corpus_import(name="bombs", path=str(directory), actor="tester", send=False)
    job_run(job.pk)
    activated("bombs")
    bomb = Task.objects.get(corpus__name="bombs", service__name="tex_to_html", document__name="a_bomb")
    # One task per lease, so that the bomb (the lowest id) is leased alone by the first request.
    process = dispatcher(PAYLOAD_MAX_BYTES=str(700 * 1024 * 1024), DISPATCHER_LEASE_BATCH="1")
    first, second = FakeWorker(process, "fake:big"), FakeWorker(process, "fake:other")
    first._dealer().send_multipart([b"tex_to_html"])
    wait_for(lambda: Task.objects.get(pk=bomb.pk).status > 0, interval=0.01, message="the bomb leased")
    got = second.ask("tex_to_html", timeout=30)
    assert got is not None and b"\\documentclass" in _contents(got[1])
    # The other worker had its task while the bomb was still being read: the first reply is not there yet.
    assert first.dealer.poll(0) == 0
    assert first.dealer.poll(120_000)
    reply = first.dealer.recv_multipart()
    assert reply[0] != str(bomb.pk).encode()  # the next task (or no work), never the bomb
    wait_for(lambda: Task.objects.get(pk=bomb.pk).status == -5, message="the bomb invalid")
    assert _message(bomb) == ("fatal", "invalid", "too_large", -5)
    assert Task.objects.get(pk=bomb.pk).attempts == 1
    # Streamed: the ventilator never held the 700 MiB it read (its whole peak, interpreter included).
    assert _peak_rss_mib(process.process.pid) < 250
    first.close()
    second.close()


def test_a_lone_tex_over_the_inline_budget_is_packed_on_a_thread_and_sent_whole(corpus_root, dispatcher):
    directory = corpus_root / "long"
    text = TEX_DOCUMENT.replace("Hello.", "Hello. " * (INLINE_PACK_BYTES // 6))
    assert len(text) > INLINE_PACK_BYTES
    write_tex(directory / "long.tex", text)
    job = corpus_import(name="long", path=str(directory), actor="tester", send=False)
    job_run(job.pk)
    activated("long")
    worker = FakeWorker(dispatcher())
    got = wait_for(lambda: worker.ask("tex_to_html", timeout=5), timeout=60, message="the long document")
    with zipfile.ZipFile(io.BytesIO(got[1])) as archive:
        assert archive.read("long.tex") == text.encode()
    worker.close()
