"""Papers shaped like the real ones (tests/fixtures/papers.py: arXiv-style archives with \\input files, a
style of their own, a .bib or a shipped .bbl, PDF, EPS and PNG figures, TikZ) through the whole system:
a real dispatcher and one real `manage.py worker` serving two services, the `default` and the `arxiv`
presets, every conversion in the sandbox. Each paper's status under each profile equals what latexmlc
run directly with the same profile says (on the host, with the sandbox's ImageMagick policy alone:
conversion.sandbox.host_with_policy); the figures come back as images and the bibliographies filled."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from conversion import imagemagick, profiles
from conversion.archive import inspect_entry, pack_entry
from conversion.engine import LOG_NAME, latexmlc_path
from conversion.logparse import parse_log
from conversion.sandbox import host_with_policy
from conversion.worker import unpack_payload
from corpora.models import Task
from tests.corpora.helpers import activated
from tests.dispatcher.harness import DispatcherProcess, process_stop, wait_for, worker_process
from tests.fixtures.papers import PAPERS, papers_write

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TIMEOUT = 120
SERVICES = {"tex_to_html": "default", "arxiv_options": "arxiv"}


def direct_status(archive: Path, preset: str, work: Path) -> int:
    """The task status latexmlc itself gives the paper under the preset's profile, run on the host."""
    entry = inspect_entry(archive, archive.name)
    unpack_payload(pack_entry(archive, entry.kind, archive.name), work)
    main = PurePosixPath(entry.main_file)
    how = profiles.invocation(profiles.PRESETS[preset].profile, roots=[], timeout=TIMEOUT, memory_mb=4096)
    argv = [
        latexmlc_path(how.executable), "--format=html5", f"--dest={work / 'out' / (main.stem + '.html')}",
        f"--log={LOG_NAME}", f"--timeout={int(how.timeout)}", *how.options, f"./{main.name}",
    ]  # fmt: skip
    policy = imagemagick.policy_xml(memory_mb=how.memory_mb, disk_mb=2048, timeout=how.timeout)
    with host_with_policy(policy) as (prefix, descriptors):
        subprocess.run(
            [*prefix, *argv], cwd=work / main.parent, pass_fds=descriptors, capture_output=True,
            timeout=TIMEOUT + 30, check=False,
        )  # fmt: skip
    return parse_log((work / main.parent / LOG_NAME).read_bytes()).status


def result_files(results: Path, task: Task) -> dict[str, bytes]:
    archive = results / str(task.corpus_id) / str(task.service_id) / f"{task.pk}.zip"
    with zipfile.ZipFile(io.BytesIO(archive.read_bytes())) as opened:
        return {name: opened.read(name) for name in opened.namelist()}


@pytest.fixture
def papers(corpus_root):
    from corpora.actions.corpora import corpus_import
    from jobs.runner import job_run
    from services.actions import service_register

    papers_write(corpus_root / "papers")
    job_run(corpus_import(name="papers", path=str(corpus_root / "papers"), actor="tester", send=False).pk)
    service_register(name="arxiv_options", actor="tester", profile="arxiv")
    for service in SERVICES:
        activated("papers", service)
    return corpus_root / "papers"


def test_real_shaped_papers_convert_as_latexmlc_does_under_each_profile_with_figures_and_bibliographies(
    papers, corpus_root, tmp_path, process_tmpdir
):
    expected = {
        (archive.name.removesuffix(".tar.gz"), service): direct_status(
            archive, preset, tmp_path / service / archive.name
        )
        for archive in sorted(papers.iterdir())
        for service, preset in SERVICES.items()
    }
    results = tmp_path / "results"
    dispatcher = DispatcherProcess(
        RESULTS_DIR=str(results), CORPUS_ROOTS=str(corpus_root), CONVERSION_TIMEOUT_SECONDS=str(TIMEOUT)
    ).start()
    worker = worker_process(dispatcher, "--service", "arxiv_options", scratch=process_tmpdir, concurrency=2)
    tasks = Task.objects.filter(corpus__name="papers", service__name__in=list(SERVICES)).select_related(
        "document", "service"
    )
    try:
        wait_for(
            lambda: tasks.filter(status__lt=0).count() == len(PAPERS) * len(SERVICES), timeout=600, interval=0.5,
            message="every paper converted under both profiles",
        )  # fmt: skip
    finally:
        process_stop(worker)
        dispatcher.stop()
    converted = {(task.document.name, task.service.name): task.status for task in tasks}
    assert converted == expected
    # The statuses differ where the profiles do: arXiv's options load the paper's own style file.
    assert expected[("figures-bib", "tex_to_html")] != expected[("figures-bib", "arxiv_options")]

    by_name = {(task.document.name, task.service.name): task for task in tasks}
    files = result_files(results, by_name[("figures-bib", "tex_to_html")])
    html = next(data for name, data in files.items() if name.endswith(".html")).decode()
    # The PDF, EPS and PNG figures are images in the HTML, each one a PNG in the result.
    sources = re.findall(r'<img src="(?!data:)([^"]+)"', html)
    assert len(sources) == 3 and "ltx_missing_image" not in html
    for source in sources:
        assert files[source][:8] == b"\x89PNG\r\n\x1a\n", source
    # The .bib was processed: both cited works are in the bibliography, and the citations resolve.
    assert len(re.findall(r'class="ltx_bibitem\b', html)) == 2 and "ltx_missing_citation" not in html
    # A shipped .bbl is used where there is no .bib.
    amsart = next(
        data for name, data in result_files(results, by_name[("amsart-bbl", "tex_to_html")]).items()
        if name.endswith(".html")
    ).decode()  # fmt: skip
    assert "Disquisitiones arithmeticae" in amsart and "ltx_missing_citation" not in amsart
