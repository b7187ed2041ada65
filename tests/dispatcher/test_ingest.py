"""Result decoding and batch ingestion, without sockets."""

from __future__ import annotations

import pytest

from conversion.zips import zip_build
from corpora.models import LogMessage, Task, TaskRuntime
from corpora.results import result_path
from dispatcher.ingest import BadResult, RawResult, result_decode, result_ingest
from tests.corpora.helpers import activated, imported
from tests.dispatcher.harness import CLEAN_LOG, WARNING_LOG, result_zip


def test_a_result_over_the_size_limit_makes_the_task_invalid():
    decoded = result_decode(result_zip(CLEAN_LOG, {"big.html": b"x" * 5000}), max_bytes=1000)
    assert decoded.status == -5 and decoded.archive is None
    assert [(m.severity, m.category, m.what) for m in decoded.messages] == [("fatal", "invalid", "too_large")]


def test_an_empty_result_is_fatal_and_a_non_zip_is_refused():
    assert result_decode(b"", max_bytes=1000).messages[0].what == "empty_result"
    with pytest.raises(BadResult):
        result_decode(b"definitely not a zip", max_bytes=1000)


def test_a_result_whose_log_cannot_be_read_is_refused_whatever_zipfile_raises():
    data = zip_build([("cortex.log", WARNING_LOG.encode(), 0.0)])  # deflated
    flags = data.index(b"PK\x01\x02") + 8
    encrypted = bytes(data[:6]) + bytes([data[6] | 1]) + bytes(data[7:flags]) + bytes([data[flags] | 1])
    encrypted += bytes(data[flags + 1 :])
    body = 30 + len("cortex.log")  # the deflate stream of the first member, cortex.log
    broken = bytes(data[:body]) + b"\xff" * 8 + bytes(data[body + 8 :])
    # zipfile raises RuntimeError (a password is wanted) and zlib.error; either used to stop the sink.
    for damaged in (encrypted, broken):
        with pytest.raises(BadResult):
            result_decode(damaged, max_bytes=10_000)


def test_a_result_without_cortex_log_is_fatal_and_keeps_its_archive():
    decoded = result_decode(result_zip("", {"a.html": b"<p/>"}, with_log=False), max_bytes=10_000)
    assert (decoded.status, decoded.messages[0].what, decoded.archive is not None) == (-4, "missing_log", True)


@pytest.mark.django_db
def test_a_batch_applies_leased_results_once_and_discards_the_rest(corpus_root, tmp_path):
    results_dir = tmp_path / "results"
    imported(corpus_root, "c", documents=4)
    activated("c")
    tasks = list(Task.objects.filter(service__name="tex_to_html").order_by("pk"))
    Task.objects.filter(pk__in=[t.pk for t in tasks[:3]]).update(status=99)  # three leased, one TODO
    service_ids = {
        "tex_to_html": tasks[0].service_id,
        "import": Task.objects.filter(service__name="import")[0].service_id,
    }
    batch = [
        RawResult("w", "tex_to_html", str(tasks[0].pk), result_zip(WARNING_LOG)),
        RawResult("w", "tex_to_html", str(tasks[0].pk), result_zip(CLEAN_LOG)),  # a duplicate in the batch
        RawResult("w", "tex_to_html", str(tasks[1].pk), result_zip(CLEAN_LOG)),
        RawResult("w", "import", str(tasks[2].pk), result_zip(CLEAN_LOG)),  # wrong service for the task
        RawResult("w", "tex_to_html", str(tasks[3].pk), result_zip(CLEAN_LOG)),  # not leased
        RawResult("w", "nope", "1", result_zip(CLEAN_LOG)),  # unknown service
    ]
    outcome = result_ingest(batch, service_ids=service_ids, results_dir=results_dir, max_bytes=10**6)
    assert (outcome.ingested, outcome.discarded) == (2, 4)
    statuses = dict(Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("pk", "status"))
    assert [statuses[t.pk] for t in tasks] == [-3, -1, 99, 0]
    assert LogMessage.objects.filter(task_id=tasks[0].pk).count() == 3
    assert dict(TaskRuntime.objects.values_list("task_id", "runtime_ms")) == {tasks[0].pk: 42, tasks[1].pk: 7}
    assert outcome.pairs == {(tasks[0].corpus_id, tasks[0].service_id)}
    # Result files: in place for the two applied, none for the discarded, nothing else.
    kept = sorted(p.relative_to(results_dir).as_posix() for p in results_dir.rglob("*") if p.is_file())
    pair_dir = f"{tasks[0].corpus_id}/{tasks[0].service_id}"
    assert kept == sorted([f"{pair_dir}/{tasks[0].pk}.zip", f"{pair_dir}/{tasks[1].pk}.zip"])


@pytest.mark.django_db
def test_a_rerun_result_replaces_the_file_whole_and_a_failed_write_leaves_no_file(corpus_root, tmp_path, monkeypatch):
    results_dir = tmp_path / "results"
    imported(corpus_root, "c", documents=2)
    activated("c")
    first, second = Task.objects.filter(service__name="tex_to_html").order_by("pk")
    service_ids = {"tex_to_html": first.service_id}
    path = result_path(results_dir, first.corpus_id, first.service_id, first.pk)

    def ingest_one(task: Task, data: bytes) -> int:
        Task.objects.filter(pk=task.pk).update(status=99)
        raw = [RawResult("w", "tex_to_html", str(task.pk), data)]
        return result_ingest(raw, service_ids=service_ids, results_dir=results_dir, max_bytes=10**6).ingested

    old, new = result_zip(WARNING_LOG), result_zip(CLEAN_LOG, {"doc.html": b"<p>new</p>"})
    assert ingest_one(first, old) == 1 and path.read_bytes() == old
    assert ingest_one(first, new) == 1 and path.read_bytes() == new  # the rerun's archive, whole
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{first.pk}.zip"]  # no temporary file left

    def disk_full(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("corpora.results.os.write", disk_full)
    with pytest.raises(OSError, match="No space"):
        ingest_one(second, new)
    # Nothing committed, no half-written file: the task is still leased and its result will come again.
    assert Task.objects.get(pk=second.pk).status == 99
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{first.pk}.zip"]


GOVERNOR_LOG = (
    "Warning:expected:label Missing label target\n"
    "Fatal:infrastructure:governor the worker's memory governor stopped the conversion: the machine had 900 MB of"
    " memory available, below the floor of 1024 MB; this conversion held 700 MB, the most of the 2 running\n"
    "Status:conversion:3\nInfo:runtime_ms:900\n"
)


@pytest.mark.django_db
def test_a_result_the_governor_stopped_sends_its_task_back_until_its_attempts_run_out(corpus_root, tmp_path):
    """Not the document's fault: the task goes back to TODO with its attempt counted and nothing applied,
    while it has attempts left; on its last attempt it is the fatal result it is, with the governor's message."""
    results_dir = tmp_path / "results"
    imported(corpus_root, "c", documents=2)
    activated("c")
    early, last = Task.objects.filter(service__name="tex_to_html").order_by("pk")
    Task.objects.filter(pk=early.pk).update(status=99, attempts=1)
    Task.objects.filter(pk=last.pk).update(status=99, attempts=3)
    batch = [RawResult("w:0", "tex_to_html", str(task.pk), result_zip(GOVERNOR_LOG)) for task in (early, last)]
    outcome = result_ingest(
        batch, service_ids={"tex_to_html": early.service_id}, results_dir=results_dir, max_bytes=10**6
    )  # DISPATCHER_MAX_ATTEMPTS is 3
    assert (outcome.ingested, outcome.retried, outcome.discarded) == (1, 1, 0)
    early.refresh_from_db()
    last.refresh_from_db()
    assert (early.status, early.attempts, early.leased_until, early.last_worker) == (0, 1, None, "w:0")
    assert (
        not LogMessage.objects.filter(task=early).exists()
        and not result_path(results_dir, early.corpus_id, early.service_id, early.pk).exists()
    )
    assert last.status == -4
    fatal = LogMessage.objects.get(task=last, severity="fatal")
    assert (fatal.category, fatal.what) == ("infrastructure", "governor")
    assert fatal.details.startswith("the worker's memory governor stopped the conversion: the machine had 900 MB")


HOST_OOM_LOG = (
    "Warning:expected:label Missing label target\n"
    "Fatal:infrastructure:host_oom the kernel's OOM killer ended the conversion for the host's memory\n"
    "Status:conversion:3\nInfo:runtime_ms:900\nInfo:cpu_ms:850\n"
)


def test_only_an_infrastructure_fatal_as_the_log_s_last_fatal_marks_a_result_for_another_attempt():
    assert result_decode(result_zip(GOVERNOR_LOG), max_bytes=10**6).infrastructure == "governor"
    assert result_decode(result_zip(HOST_OOM_LOG), max_bytes=10**6).infrastructure == "host_oom"
    own_limits = (
        WARNING_LOG,
        "Fatal:limit:disk the conversion wrote more\nStatus:conversion:3\n",
        "Fatal:limit:memory the conversion's processes together passed its memory limit\nStatus:conversion:3\n",
        # An infrastructure line that latexmlc's own fatal follows is not the engine's last word.
        "Fatal:infrastructure:governor said early\nFatal:perl:die latexmlc died\nStatus:conversion:3\n",
    )
    for log in own_limits:
        assert result_decode(result_zip(log), max_bytes=10**6).infrastructure is None


@pytest.mark.django_db
def test_a_result_s_cpu_time_and_peak_memory_are_stored_with_its_runtime_and_counted_into_its_run(
    corpus_root, tmp_path
):
    from corpora.choices import Stage
    from corpora.models import Run, TelemetryBin, TelemetryMinute
    from corpora.telemetry import duration_bin

    imported(corpus_root, "c", documents=2)
    activated("c")
    tasks = list(Task.objects.filter(service__name="tex_to_html").order_by("pk"))
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(status=99)
    measured = "Status:conversion:0\nInfo:runtime_ms:1500\nInfo:cpu_ms:1234\nInfo:peak_rss_kb:300000\n"
    batch = [
        RawResult("w", "tex_to_html", str(tasks[0].pk), result_zip(measured)),
        RawResult("w", "tex_to_html", str(tasks[1].pk), result_zip(CLEAN_LOG)),  # an older worker's: unmeasured
    ]
    outcome = result_ingest(
        batch, service_ids={"tex_to_html": tasks[0].service_id}, results_dir=tmp_path / "r", max_bytes=10**6
    )
    assert outcome.ingested == 2
    rows = TaskRuntime.objects.values_list("task_id", "runtime_ms", "cpu_ms", "peak_rss_kb")
    stored = {row[0]: row[1:] for row in rows}
    assert stored == {tasks[0].pk: (1500, 1234, 300000), tasks[1].pk: (7, None, None)}
    run = Run.objects.get(corpus__name="c", service__name="tex_to_html")
    assert list(TelemetryMinute.objects.filter(run_id=run.pk).values_list("count", "cpu_ms", "cpu_results")) == [
        (2, 1234, 1)
    ]
    peaks = TelemetryBin.objects.filter(run_id=run.pk, stage=Stage.PEAK_MEMORY).values_list("bin", "count")
    assert list(peaks) == [(duration_bin(300000), 1)]
