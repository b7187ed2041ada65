"""The bubblewrap sandbox around latexmlc, with the real latexmlc and bwrap: a document cannot read
files outside its working directory, reach the network or outlive its deadline; an unusable sandbox
is refused in one line. Each attack is also run unsandboxed, to show that it does read the file there."""

from __future__ import annotations

import io
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from django.conf import settings as django_settings

from conversion import sandbox as conversion_sandbox
from conversion.engine import TERMINATE_GRACE_SECONDS, SandboxUnavailable, convert, latexmlc_path, sandbox_check
from conversion.sandbox import Sandbox, problem
from conversion.worker import convert_payload, run_worker
from tests.support import PASSWD_LINE, PROJECT_DIR, Planted, child_env, plant, write_tex

BWRAP = Sandbox()
NONE = Sandbox(mode="none")
LOOPING = "\\documentclass{article}\n\\begin{document}\n\\loop\\iftrue\\repeat\n\\end{document}\n"
MEMORY_HOG = "\\documentclass{article}\n\\begin{document}\n\\def\\x{aaaaaaaa}\\loop\\edef\\x{\\x\\x}\\iftrue\\repeat\n\\end{document}\n"  # noqa: E501


@pytest.fixture
def latexmlc() -> str:
    return latexmlc_path()


@pytest.fixture
def planted(tmp_path) -> Iterator[Planted]:
    with plant(tmp_path / "outside", tmp_path / "work") as planted:
        yield planted


def output_text(conversion) -> str:
    files = [path for path in conversion.output_dir.rglob("*") if path.is_file()]
    return "\n".join(path.read_text(errors="replace") for path in files) + conversion.log.decode(errors="replace")


def secret_key_file() -> str:
    return (django_settings.VAR_DIR / "secret_key").read_text().strip()


@pytest.mark.slow
def test_an_unsandboxed_run_reads_every_planted_file(tmp_path, planted, latexmlc):
    # The control: each attack works without the sandbox, so the sandboxed test below can fail.
    write_tex(tmp_path / "work" / "doc.tex", planted.document)
    text = output_text(convert(tmp_path / "work", "doc.tex", timeout=120, sandbox=NONE))
    assert planted.leaked(text) == sorted(planted.markers)
    assert PASSWD_LINE in text


@pytest.mark.slow
def test_a_sandboxed_run_reads_no_file_outside_its_working_directory(tmp_path, planted, latexmlc):
    write_tex(tmp_path / "work" / "doc.tex", planted.document)
    conversion = convert(tmp_path / "work", "doc.tex", timeout=120, sandbox=BWRAP)
    text = output_text(conversion)
    assert conversion.status_code == 2 and "Start." in text and "End." in text  # converted, around the holes
    assert planted.leaked(text) == []
    assert PASSWD_LINE not in text and secret_key_file() not in text
    assert (tmp_path / "work" / "cortex.log").is_file()
    assert re.search(rb"^Error:missing_file:/etc/passwd ", conversion.log, re.MULTILINE)


@pytest.mark.slow
def test_the_worker_payload_conversion_reads_no_file_outside_its_task(tmp_path, latexmlc):
    # convert_payload works in its own temporary directory, the way the worker converts every task,
    # /tmp/cortex-task-XXXX/source: the relative attacks are written from a directory of the same depth.
    with plant(tmp_path / "outside", Path("/tmp/cortex-task-unknown/source")) as planted:
        payload = io.BytesIO()
        with zipfile.ZipFile(payload, "w") as archive:
            archive.writestr("paper.tex", planted.document)
        for sandbox, expected in ((NONE, sorted(planted.markers)), (BWRAP, [])):
            result = zipfile.ZipFile(io.BytesIO(convert_payload(payload.getvalue(), timeout=120, sandbox=sandbox)))
            text = "\n".join(result.read(name).decode(errors="replace") for name in result.namelist())
            assert planted.leaked(text) == expected, sandbox.mode
            assert (PASSWD_LINE in text) == (sandbox is NONE)
            assert "Start." in text and "End." in text


def network_probe_script(tmp_path: Path, port: int) -> Path:
    """A stand-in latexmlc that tries to open a TCP connection to 127.0.0.1:port and writes what happened."""
    script = tmp_path / "network-latexmlc"
    script.write_text(
        "#!/bin/sh\n"
        "perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(PeerAddr => \"127.0.0.1:"
        f'{port}", Timeout => 5) ? "connected" : "refused"\' > network.txt\n'
        "echo Status:conversion:0 > cortex.log\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_the_network_is_not_reachable_from_the_sandbox(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.settimeout(0)
        script = network_probe_script(tmp_path, listener.getsockname()[1])
        for sandbox, expected in ((NONE, "connected"), (BWRAP, "refused")):
            work = tmp_path / sandbox.mode
            write_tex(work / "doc.tex")
            conversion = convert(work, "doc.tex", timeout=30, latexmlc=str(script), sandbox=sandbox)
            assert conversion.status_code == 0
            assert (work / "network.txt").read_text() == expected, sandbox.mode


def _identity(process: psutil.Process) -> tuple[int, float] | None:
    try:
        return process.pid, process.create_time()
    except psutil.Error:
        return None


@dataclass
class Descendants:
    """Every process the conversion started (sampled while it runs), to check none outlives it. Only
    processes below this one that were not there when the watch began count: a server the test session
    started earlier (its own Redis, say) is not the conversion's."""

    seen: dict[int, tuple[float, str]] = field(default_factory=dict)
    # Every command line seen: a child seen between its fork and its exec still shows its parent's (bwrap's),
    # one seen as it exits shows none, so what it runs is among them but need not be its first or its last.
    commands: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)
    before: set[tuple[int, float]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.before = {ident for child in psutil.Process().children(recursive=True) if (ident := _identity(child))}

    def watch(self) -> None:
        me = psutil.Process()
        while not self.stop.is_set():
            for child in me.children(recursive=True):
                try:
                    if (child.pid, child.create_time()) not in self.before:
                        cmdline = " ".join(child.cmdline())
                        self.seen.setdefault(child.pid, (child.create_time(), cmdline))
                        self.commands.add(cmdline)
                except psutil.Error:
                    continue
            self.stop.wait(0.05)

    def alive(self) -> list[str]:
        left = []
        for pid, (created, cmdline) in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{pid} {cmdline}")
            except psutil.NoSuchProcess:
                continue
        return left


def watched(run):
    descendants = Descendants()
    watcher = threading.Thread(target=descendants.watch, daemon=True)
    watcher.start()
    try:
        result = run()
    finally:
        descendants.stop.set()
        watcher.join()
    return result, descendants


@pytest.mark.slow
def test_a_looping_document_is_killed_at_the_timeout_inside_the_sandbox_and_leaves_no_process(tmp_path, latexmlc):
    write_tex(tmp_path / "loop.tex", LOOPING)
    started = time.monotonic()
    conversion, descendants = watched(lambda: convert(tmp_path, "loop.tex", timeout=3, sandbox=BWRAP))
    elapsed = time.monotonic() - started
    assert conversion.timed_out and conversion.status_code == 3
    assert 3 <= elapsed < 3 + TERMINATE_GRACE_SECONDS + 2
    assert b"Fatal:timeout:timedout Conversion exceeded the timeout of 3 seconds" in conversion.log
    assert any("latexmlc" in cmdline and "bwrap" not in cmdline for cmdline in descendants.commands)
    assert descendants.alive() == []


@pytest.mark.slow
def test_a_document_over_the_memory_limit_is_killed_inside_the_sandbox_and_leaves_no_process(tmp_path, latexmlc):
    write_tex(tmp_path / "hog.tex", MEMORY_HOG)
    conversion, descendants = watched(lambda: convert(tmp_path, "hog.tex", timeout=120, memory_mb=250, sandbox=BWRAP))
    assert not conversion.timed_out and conversion.status_code == 3
    assert re.search(rb"^Fatal:perl:(out_of_memory|die) ", conversion.log, re.MULTILINE)
    assert any("latexmlc" in cmdline and "bwrap" not in cmdline for cmdline in descendants.commands)
    assert descendants.alive() == []


def test_a_converter_that_ignores_sigterm_inside_the_sandbox_is_killed_with_all_it_started(tmp_path):
    script = tmp_path / "stubborn-latexmlc"
    script.write_text("#!/bin/sh\ntrap '' TERM\nsleep 300 &\nsleep 301\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_tex(tmp_path / "source" / "doc.tex")
    conversion, descendants = watched(
        lambda: convert(tmp_path / "source", "doc.tex", timeout=1, latexmlc=str(script), sandbox=BWRAP)
    )
    assert conversion.timed_out and conversion.status_code == 3
    assert {"sleep 300", "sleep 301"} <= descendants.commands  # the helper and the leader ran, in the sandbox
    assert descendants.alive() == []


def test_links_the_run_leaves_are_not_followed_when_its_output_is_read(tmp_path):
    # Code in the sandbox (a Perl binding a document ships) replaces its log and output by links to host files.
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOSTSECRET marker\n")
    script = tmp_path / "linking-latexmlc"
    script.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do case "$arg" in --dest=*) dest="${arg#--dest=}";; esac; done\n'
        f'out=$(dirname "$dest"); rm -rf "$out"; ln -s {tmp_path} "$out"\n'
        f"rm -f cortex.log; ln -s {secret} cortex.log\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as archive:
        archive.writestr("paper.tex", "\\documentclass{article}\\begin{document}x\\end{document}")
    result = zipfile.ZipFile(io.BytesIO(convert_payload(payload.getvalue(), timeout=30, latexmlc=str(script))))
    assert result.namelist() == ["cortex.log"]
    log = result.read("cortex.log")
    assert b"HOSTSECRET" not in log and b"Status:conversion:3" in log


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="only a root caller runs the sandbox as nobody and stages what nobody cannot reach;"
    " otherwise bwrap runs as the caller, who reaches its own TMPDIR",
)
def test_a_temp_directory_the_sandbox_user_cannot_reach_still_converts(tmp_path, monkeypatch):
    # TMPDIR inside a private directory (as a test's tmp_path is): the probe and the staging copy of a
    # private working directory go to the system's temp directory instead of failing to bind.
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setattr(conversion_sandbox, "_usable", set())  # probe again, here
    assert problem(Sandbox()) is None
    write_tex(private / "work" / "doc.tex")
    conversion = convert(private / "work", "doc.tex", timeout=120, sandbox=BWRAP)
    assert conversion.status_code == 0, conversion.log.decode(errors="replace")[-2000:]
    assert list(conversion.output_dir.glob("*.html"))


def test_an_unusable_sandbox_refuses_to_convert_with_the_reason(tmp_path):
    missing = Sandbox(bwrap=str(tmp_path / "no-bwrap-here"))
    write_tex(tmp_path / "doc.tex")
    with pytest.raises(SandboxUnavailable, match=r"^the conversion sandbox cannot start: .*no-bwrap-here is not inst"):
        convert(tmp_path, "doc.tex", sandbox=missing)
    assert not list(tmp_path.glob(".cortex-output-*"))  # refused before anything ran
    # A bwrap that starts but fails (as with user namespaces refused) is refused too; its last stderr line says why.
    assert problem(Sandbox(bwrap="false")) == "the conversion sandbox cannot start: bwrap exited with code 1"
    with pytest.raises(SandboxUnavailable):
        run_worker(ventilator="tcp://127.0.0.1:1", sink="tcp://127.0.0.1:2", service="x", sandbox=missing)
    sandbox_check(NONE)  # none is never refused


def test_the_worker_command_line_refuses_an_unusable_sandbox_in_one_line(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("CONVERSION_SANDBOX", "CONVERSION_BWRAP")}
    result = subprocess.run(
        [sys.executable, "-m", "conversion.worker", "--ventilator", "tcp://127.0.0.1:1", "--sink", "tcp://127.0.0.1:2",
         "--service", "tex_to_html", "--bwrap", str(tmp_path / "no-bwrap")],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("the conversion sandbox cannot start: ")
    bad = subprocess.run(
        [sys.executable, "-m", "conversion.worker", "--ventilator", "tcp://127.0.0.1:1", "--sink", "tcp://127.0.0.1:2",
         "--service", "tex_to_html"],
        cwd=PROJECT_DIR, env={**env, "CONVERSION_SANDBOX": "off"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "CONVERSION_SANDBOX must be one of bwrap, none, not 'off'" in bad.stderr


def test_manage_worker_refuses_an_unusable_sandbox_in_one_line_and_serves_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "worker", "--service", "tex_to_html"], cwd=PROJECT_DIR,
        env=child_env(CONVERSION_BWRAP=str(tmp_path / "no-bwrap")), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert re.match(r"^CommandError: the conversion sandbox cannot start: \S*no-bwrap is not installed", result.stderr)


@pytest.mark.slow
def test_a_payload_whose_main_file_is_in_a_folder_still_sees_the_rest_of_the_payload(latexmlc):
    payload = io.BytesIO()
    with zipfile.ZipFile(payload, "w") as archive:
        main = "\\documentclass{article}\\begin{document}\\input{../shared/part}\\end{document}"
        archive.writestr("paper/main.tex", main)
        archive.writestr("shared/part.tex", "Sharedpart sentence.\n")
    result = zipfile.ZipFile(io.BytesIO(convert_payload(payload.getvalue(), timeout=120, sandbox=BWRAP)))
    assert b"Status:conversion:0" in result.read("cortex.log")
    assert "Sharedpart sentence." in result.read("main.html").decode()


def _scratch_tmps(*directories: Path) -> set[Path]:
    return {entry for directory in directories for entry in directory.iterdir() if ".cortex-tmp-" in entry.name}


def test_the_sandbox_tmp_is_disk_under_the_disk_limit_and_gone_afterwards(tmp_path):
    """/tmp is a directory on disk (a tmpfs would be memory outside the address-space limit, a second
    budget): filling it past the disk limit ends the run with a message naming the limit."""
    script = tmp_path / "filling-latexmlc"
    script.write_text(
        "#!/bin/sh\ni=0\nwhile [ $i -lt 100 ]; do head -c 1000000 /dev/zero > /tmp/fill$i || exit 1; i=$((i+1));"
        " done\necho Status:conversion:0 > cortex.log\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_tex(tmp_path / "work" / "doc.tex")
    places = (tmp_path, Path(tempfile.gettempdir()))
    before = _scratch_tmps(*places)
    conversion = convert(
        tmp_path / "work", "doc.tex", timeout=60, memory_mb=100, disk_mb=20, latexmlc=str(script), sandbox=BWRAP
    )
    assert conversion.status_code == 3
    assert b"Fatal:limit:disk the conversion wrote more than its disk limit of 20 MB" in conversion.log
    assert _scratch_tmps(*places) == before  # its /tmp is removed with what it held


def test_many_files_in_the_working_directory_past_the_disk_limit_end_the_run(tmp_path):
    script = tmp_path / "filling-latexmlc"
    script.write_text(
        "#!/bin/sh\ni=0\nwhile [ $i -lt 200 ]; do head -c 1000000 /dev/zero > fill$i; i=$((i+1)); done\n"
        "echo Status:conversion:0 > cortex.log\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_tex(tmp_path / "work" / "doc.tex")
    conversion = convert(tmp_path / "work", "doc.tex", timeout=60, disk_mb=30, latexmlc=str(script), sandbox=BWRAP)
    assert conversion.status_code == 3 and b"Fatal:limit:disk" in conversion.log
    assert not (tmp_path / "work" / "fill199").exists()  # stopped long before it wrote them all


BINDING_FILLER = (
    "package LaTeXML::Package::Pool;\nuse strict;\nuse LaTeXML::Package;\n"
    "my $chunk = 'x' x 1048576;\n"
    "for my $i (1 .. 100000) { open(my $fh, '>', \"fill$i.bin\") or last; print $fh $chunk; close($fh); }\n1;\n"
)


@pytest.mark.slow
def test_a_binding_that_writes_without_end_is_stopped_at_the_disk_limit(tmp_path, latexmlc):
    """The document's own Perl (`filler.sty.ltxml`, loaded by \\usepackage{filler}) writes 1 MB files
    until stopped; real LaTeXML in the sandbox."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "filler.sty.ltxml").write_text(BINDING_FILLER)
    write_tex(
        work / "doc.tex", "\\documentclass{article}\n\\usepackage{filler}\n\\begin{document}\nHi.\n\\end{document}\n"
    )
    conversion = convert(work, "doc.tex", timeout=120, disk_mb=40, sandbox=BWRAP)
    assert conversion.status_code == 3
    assert b"Fatal:limit:disk the conversion wrote more than its disk limit of 40 MB" in conversion.log
    # Measured every LIMIT_CHECK_SECONDS and killed at once, it writes past the limit only what the page
    # cache takes meanwhile (docs/decisions/conversion-sandbox.md), far from its 100 GB.
    assert len(list(work.glob("fill*.bin"))) < 1000


def test_one_file_cannot_grow_past_the_disk_limit(tmp_path):
    script = tmp_path / "growing-latexmlc"
    script.write_text("#!/bin/sh\nhead -c 100000000 /dev/zero > big\necho Status:conversion:0 > cortex.log\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_tex(tmp_path / "work" / "doc.tex")
    convert(tmp_path / "work", "doc.tex", timeout=60, disk_mb=10, latexmlc=str(script), sandbox=BWRAP)
    assert (tmp_path / "work" / "big").stat().st_size <= 10 * 1024 * 1024


BINDING_FORKER = (
    "package LaTeXML::Package::Pool;\nuse LaTeXML::Package;\n"
    "for my $i (1 .. 300) { my $pid = fork(); last unless defined $pid; if ($pid == 0) { sleep 600; exit 0; } }\n"
    "sleep 600;\n1;\n"
)


@pytest.mark.slow
def test_a_binding_that_forks_300_sleepers_ends_at_the_process_limit_and_leaves_no_process(tmp_path, latexmlc):
    """The document's own Perl forks 300 children that sleep; real LaTeXML in the sandbox, capped at 40."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "forker.sty.ltxml").write_text(BINDING_FORKER)
    write_tex(
        work / "doc.tex", "\\documentclass{article}\n\\usepackage{forker}\n\\begin{document}\nHi.\n\\end{document}\n"
    )
    started = time.monotonic()
    conversion, descendants = watched(lambda: convert(work, "doc.tex", timeout=120, max_processes=40, sandbox=BWRAP))
    assert time.monotonic() - started < 60  # ended at the limit, not at the timeout
    assert conversion.status_code == 3
    assert (
        b"Fatal:limit:processes the conversion tried to run more than its limit of 40 processes at once"
        in conversion.log
    )
    assert len(descendants.seen) < 300  # stopped while forking, far from its 300 sleepers
    assert descendants.alive() == []


def test_an_endless_fork_loop_is_stopped_at_the_process_limit(tmp_path):
    script = tmp_path / "forking-latexmlc"
    script.write_text("#!/bin/sh\nwhile true; do sleep 600 & done\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_tex(tmp_path / "work" / "doc.tex")
    conversion, descendants = watched(
        lambda: convert(tmp_path / "work", "doc.tex", timeout=60, max_processes=30, latexmlc=str(script), sandbox=BWRAP)
    )
    assert conversion.status_code == 3 and b"Fatal:limit:processes" in conversion.log
    assert descendants.alive() == []


def test_the_runs_tmp_sits_beside_its_working_directory_so_a_killed_worker_leaves_it_in_its_own_tmpdir(tmp_path):
    """A worker killed mid-conversion cannot remove what its conversion holds: the run's /tmp must be in
    the task's own directory (under the worker's TMPDIR), never loose in the machine's /tmp."""
    task = tmp_path / "task"
    (task / "source").mkdir(parents=True)
    task.chmod(0o711)  # as the worker makes its task directory: the sandbox user passes through it
    with conversion_sandbox.launched(BWRAP, task / "source", "/usr/bin/true") as launch:
        work, tmp = launch.written
        assert tmp.parent == work.parent and tmp.is_dir()
    assert not tmp.exists()


PROFILE_BINDING = """package LaTeXML::Package::Pool;
use strict;
use warnings;
use LaTeXML::Package;
DefMacro('\\\\profilemarker', 'Bound binding path works.');
my $wrote = open(my $fh, '>', '{bindings}/written.txt') ? 'wrote' : 'refused';
DefMacro('\\\\writeattempt', "Writing into the binding path: $wrote.");
1;
"""


def _profile_root(process_tmpdir: Path) -> Path:
    """A profile root the sandbox user can read (nobody, when the tests run as root): a stylesheet, a binding
    path with one binding, and a secret beside them that no profile names."""
    root = process_tmpdir / "profiles"
    (root / "bindings").mkdir(parents=True)
    (root / "bindings" / "mymacros.sty.ltxml").write_text(PROFILE_BINDING.replace("{bindings}", str(root / "bindings")))
    (root / "profile.css").write_text("body { color: #123456 }\n")
    (root / "secret.tex").write_text("SecretBesideTheProfileFiles marker.\n")
    for path in (root, root / "bindings"):
        path.chmod(0o755)
    return root


@pytest.mark.slow
def test_a_profiles_stylesheet_and_binding_path_are_seen_read_only_and_nothing_beside_them(
    tmp_path, process_tmpdir, latexmlc
):
    from conversion.profiles import invocation, profile_parse

    root = _profile_root(process_tmpdir)
    profile = profile_parse({"css": [str(root / "profile.css")], "paths": [str(root / "bindings")]}, roots=[root])
    run = invocation(profile, roots=[root], timeout=60, memory_mb=4096)
    document = (
        "\\documentclass{article}\n\\usepackage{mymacros}\n\\begin{document}\n\\profilemarker\n\\writeattempt\n"
        f"\\input{{{root}/secret.tex}}\n\\end{{document}}\n"
    )
    for sandbox in (NONE, BWRAP):
        work = process_tmpdir / f"work-{sandbox.mode}"
        write_tex(work / "doc.tex", document)
        conversion = convert(
            work, "doc.tex", timeout=60, latexmlc=run.executable, extra_args=run.options, read_only=run.read_only,
            sandbox=sandbox,
        )  # fmt: skip
        html = (conversion.output_dir / "doc.html").read_text()
        assert "Bound binding path works." in html, conversion.log
        assert '<link rel="stylesheet" href="profile.css"' in html
        assert (conversion.output_dir / "profile.css").read_text() == "body { color: #123456 }\n"
        # The control reads the secret and writes into the binding path; the sandbox lets it do neither.
        assert ("SecretBesideTheProfileFiles marker." in html) == (sandbox is NONE), sandbox.mode
        assert ("Writing into the binding path: wrote." in html) == (sandbox is NONE), sandbox.mode
        assert (root / "bindings" / "written.txt").exists() == (sandbox is NONE)
        (root / "bindings" / "written.txt").unlink(missing_ok=True)


def test_a_path_over_one_of_the_sandboxs_own_mounts_is_not_bound(tmp_path):
    from conversion.sandbox import bind_problem, launched

    for own in ("/", "/tmp", "/work", "/proc", "/dev", "/run", "/run/engine"):
        assert bind_problem(Path(own)) is not None, own
    for fine in ("/srv/profiles", "/tmp/profiles/bindings", "/opt/latexml-oxide"):
        assert bind_problem(Path(fine)) is None, fine
    with (
        pytest.raises(ValueError, match="would cover the sandbox's own /tmp"),
        launched(BWRAP, tmp_path, "/usr/bin/true", read_only=[Path("/tmp")]),
    ):
        pass


def test_a_sandbox_without_proc_has_none_and_still_converts_a_document(tmp_path):
    # proc `none` is what a container whose masked /proc paths refuse bwrap a fresh /proc runs with
    # (docs/decisions/container-sandbox.md): the run sees no /proc at all, and LaTeXML does not need one.
    script = tmp_path / "proc-latexmlc"
    script.write_text("#!/bin/sh\nif [ -e /proc/self/status ]; then echo mounted; else echo absent; fi > proc.txt\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    for proc, seen in (("mount", "mounted"), ("none", "absent")):
        source = tmp_path / proc
        write_tex(source / "doc.tex")
        convert(source, "doc.tex", timeout=30, latexmlc=str(script), sandbox=Sandbox(proc=proc))
        assert (source / "proc.txt").read_text().strip() == seen, proc
    write_tex(tmp_path / "real" / "doc.tex")
    conversion = convert(tmp_path / "real", "doc.tex", timeout=120, sandbox=Sandbox(proc="none"))
    assert conversion.status_code == 0, conversion.log.decode(errors="replace")[-2000:]
    assert list(conversion.output_dir.glob("*.html"))


def test_the_worker_command_line_takes_the_sandboxs_proc_from_its_option_or_the_environment(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("CONVERSION_SANDBOX")}
    argv = [sys.executable, "-m", "conversion.worker", "--ventilator", "tcp://127.0.0.1:1", "--sink",
            "tcp://127.0.0.1:2", "--service", "tex_to_html"]  # fmt: skip
    bad = subprocess.run(
        argv, cwd=PROJECT_DIR, env={**env, "CONVERSION_SANDBOX_PROC": "fresh"}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "CONVERSION_SANDBOX_PROC must be one of mount, none, not 'fresh'" in bad.stderr
    with pytest.raises(ValueError, match="the sandbox's /proc must be one of mount, none, not 'fresh'"):
        Sandbox(proc="fresh")
