"""Import of a generated corpus of 100,000 small documents (target: at most 60 s), or with --arxiv of
2,800,000 in arXiv's layout (target: at most 300 s).

The corpus is generated once under the bench corpus root and reused while its marker matches;
generation is timed separately and is not part of the measurement. The measurement is
corpus_import(..., send=False) followed by job_run in this process: scanning every entry, then the
set-based writes. The phases (listing, scan, each SQL statement, commit) are printed too.

With --arxiv the corpus is laid out as arXiv keeps its sources: month directories YYMM of up to 20,000
entries `YYMM.NNNNN.gz`, three fifths a gzipped .tex and two fifths a gzipped tar (a main .tex and an
\\input file), 15 of them corrupt and 10 tars without a main file. Generating 2.8 million entries
takes a few minutes and about 12 GB of disk (one block each); the script refuses to start without room.

With --cold the kernel's page cache is emptied before the import, so every entry comes from the disk, as
the entries of a real arXiv import do; without it, whatever of the corpus the cache still holds is read
from memory (after the generation, part of it).

Run: .venv/bin/python bench/bench_import.py [--documents N] [--arxiv] [--cold] [--keep]
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import harness

harness.configure("ccs_bench", 14, Path("/tmp/ccs-bench"))

TARGET_SECONDS = 60.0
ARXIV_TARGET_SECONDS = 300.0
ARXIV_DOCUMENTS = 2_800_000
ARXIV_MONTH_ENTRIES = 20_000
GENERATOR_VERSION = "1"

MAIN_TEX = """\\documentclass{{article}}
\\usepackage{{amsmath}}
\\title{{Generated paper {i}}}
\\begin{{document}}
\\maketitle
\\section{{Introduction}}
We study the equation $E = mc^2$ for paper {i}, see also \\cite{{ref{i}}}.
\\begin{{equation}} \\int_0^1 x^{{{i}}}\\,dx = \\frac{{1}}{{{i}+1}} \\end{{equation}}
{extra}\\end{{document}}
"""
SECTION_TEX = """\\section{{Results}}
The results of paper {i} are in Table~1.
\\begin{{tabular}}{{cc}} a & b \\\\ c & d \\end{{tabular}}
"""
# Two .tex files and neither has \documentclass nor \begin{document}: no main file.
FRAGMENT_TEX = "\\section{Orphan}\nA fragment without a preamble.\n"


@dataclass(frozen=True)
class Layout:
    """How many entries of each kind the generated corpus holds."""

    total: int
    empty_dirs: int = 10
    corrupt_zips: int = 10
    no_main_dirs: int = 5

    @property
    def invalid(self) -> int:
        return self.empty_dirs + self.corrupt_zips + self.no_main_dirs

    @property
    def valid(self) -> int:
        return self.total - self.invalid

    @property
    def marker(self) -> str:
        return f"v{GENERATOR_VERSION} total={self.total} invalid={self.invalid}\n"


def valid_entry_write(directory: Path, i: int) -> None:
    """Entry i of the valid mix: 70% sub-directories (a fifth of them with a second, non-main .tex
    pulled in by \\input), 20% lone .tex files, 5% .zip, 5% .tar.gz."""
    slot = i % 20
    if slot < 14:
        entry = directory / f"d{i:06d}"
        entry.mkdir()
        with_section = slot % 5 == 0
        extra = "\\input{results}\n" if with_section else ""
        (entry / "main.tex").write_text(MAIN_TEX.format(i=i, extra=extra))
        if with_section:
            (entry / "results.tex").write_text(SECTION_TEX.format(i=i))
        if slot % 3 == 0:
            (entry / "refs.bib").write_text(f"@article{{ref{i}, title={{Reference {i}}}, year={{2020}}}}\n")
    elif slot < 18:
        (directory / f"t{i:06d}.tex").write_text(MAIN_TEX.format(i=i, extra=""))
    elif slot == 18:
        with zipfile.ZipFile(directory / f"z{i:06d}.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("paper.tex", MAIN_TEX.format(i=i, extra="\\input{results}\n"))
            archive.writestr("results.tex", SECTION_TEX.format(i=i))
    else:
        with tarfile.open(directory / f"a{i:06d}.tar.gz", "w:gz") as archive:
            for member, text in (
                ("ms.tex", MAIN_TEX.format(i=i, extra="\\input{sections/results}\n")),
                ("sections/results.tex", SECTION_TEX.format(i=i)),
            ):
                data = text.encode()
                info = tarfile.TarInfo(member)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))


@dataclass(frozen=True)
class ArxivLayout:
    """A corpus in arXiv's layout: months of gzipped entries, a few of them invalid."""

    total: int
    corrupt: int = 15
    no_main: int = 10

    @property
    def invalid(self) -> int:
        return self.corrupt + self.no_main

    @property
    def marker(self) -> str:
        return f"v{GENERATOR_VERSION} arxiv total={self.total} invalid={self.invalid}\n"


def _tar_gz(members: list[tuple[str, str]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member, text in members:
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def arxiv_generate(directory: Path, layout: ArxivLayout) -> None:
    """Months 0701, 0702, ... of ARXIV_MONTH_ENTRIES entries each; 100 variants of each kind of content,
    written under each entry's own name (what an entry holds does not change what inspecting it costs)."""
    singles = [gzip.compress(MAIN_TEX.format(i=i, extra="").encode(), 6) for i in range(100)]
    tars = [
        _tar_gz(
            [("ms.tex", MAIN_TEX.format(i=i, extra="\\input{results}\n")), ("results.tex", SECTION_TEX.format(i=i))]
        )
        for i in range(100)
    ]
    no_main = _tar_gz([("a.tex", FRAGMENT_TEX), ("b.tex", FRAGMENT_TEX)])
    for i in range(layout.total):
        year, month = divmod(i // ARXIV_MONTH_ENTRIES, 12)
        month_dir = directory / f"{7 + year:02d}{month + 1:02d}"
        number = i % ARXIV_MONTH_ENTRIES
        if number == 0:
            month_dir.mkdir()
        if i < layout.corrupt:
            data = b"\x1f\x8b this is not a gzip stream " + os.urandom(32)
        elif i < layout.invalid:
            data = no_main
        else:
            data = singles[i % 100] if i % 5 < 3 else tars[i % 100]
        (month_dir / f"{month_dir.name}.{number:05d}.gz").write_bytes(data)


def invalid_entries_write(directory: Path, layout: Layout) -> None:
    """Empty directories, corrupt zips, and directories whose .tex files have no preamble."""
    for n in range(layout.empty_dirs):
        (directory / f"empty{n:03d}").mkdir()
    for n in range(layout.corrupt_zips):
        (directory / f"corrupt{n:03d}.zip").write_bytes(b"PK\x03\x04 this is not a zip archive " + os.urandom(64))
    for n in range(layout.no_main_dirs):
        entry = directory / f"nomain{n:03d}"
        entry.mkdir()
        (entry / "a.tex").write_text(FRAGMENT_TEX)
        (entry / "b.tex").write_text(FRAGMENT_TEX)


def corpus_generate(directory: Path, layout: Layout | ArxivLayout) -> float | None:
    """Generate the corpus unless a complete one with the same layout is there; returns seconds
    spent generating, or None when the existing one was reused."""
    marker = directory / ".generated"
    if marker.is_file() and marker.read_text() == layout.marker:
        return None
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    with harness.timed() as timer:
        if isinstance(layout, ArxivLayout):
            arxiv_generate(directory, layout)
        else:
            for i in range(layout.valid):
                valid_entry_write(directory, i)
            invalid_entries_write(directory, layout)
        marker.write_text(layout.marker)  # hidden: the importer skips names starting with "."
    return timer.seconds


def counts_check(corpus_name: str, layout: Layout | ArxivLayout, result: dict) -> None:
    """The import must have recorded every entry, and exactly the generated invalid ones as invalid."""
    from corpora.models import Corpus, Document, LogMessage, Task

    corpus = Corpus.objects.get(name=corpus_name)
    documents = Document.objects.filter(corpus=corpus).count()
    invalid_tasks = Task.objects.filter(corpus=corpus, status=-5).count()
    messages = LogMessage.objects.filter(corpus=corpus).count()
    print(f"check: documents={documents} invalid tasks={invalid_tasks} messages={messages} result={result}")
    if corpus.state != "ready":
        harness.fail(f"the corpus is in state {corpus.state!r}, not 'ready'")
    if documents != layout.total or result.get("documents") != layout.total:
        harness.fail(f"{documents} documents recorded (job said {result.get('documents')}), expected {layout.total}")
    if invalid_tasks != layout.invalid or result.get("invalid") != layout.invalid or messages != layout.invalid:
        harness.fail(f"{invalid_tasks} invalid tasks / {messages} messages, expected {layout.invalid}")


def cache_drop() -> None:
    """Write back and drop the kernel's page cache, dentries and inodes, so that every entry is read from
    the disk, as an import of arXiv's sources (terabytes) reads them. PostgreSQL's own buffers stay."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        harness.fail(f"--cold needs root to empty the page cache ({exc.strerror})")
    print("the page cache was emptied: every entry is read from the disk")


def main() -> None:
    """Generate (once), import, check, and print the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, help="entries in the generated corpus (100,000; 2,800,000 --arxiv)")
    parser.add_argument("--arxiv", action="store_true", help="arXiv's layout: YYMM/YYMM.NNNNN.gz")
    parser.add_argument("--keep", action="store_true", help="keep the imported corpus afterwards")
    parser.add_argument(
        "--cold", action="store_true",
        help="empty the kernel's page cache before the import (root only): the entries are read from the disk",
    )  # fmt: skip
    harness.quiet_arguments(parser, wait=900)
    args = parser.parse_args()

    harness.setup()

    from corpora import scan
    from corpora.actions import corpora as actions
    from jobs.runner import job_run

    if args.arxiv:
        layout: Layout | ArxivLayout = ArxivLayout(total=args.documents or ARXIV_DOCUMENTS)
        target = ARXIV_TARGET_SECONDS
        corpus_name = f"bench-import-arxiv-{layout.total}"
    else:
        layout = Layout(total=args.documents or 100_000)
        target = TARGET_SECONDS
        corpus_name = f"bench-import-{layout.total}"
    directory = harness.CORPUS_ROOT / corpus_name
    marker = directory / ".generated"
    if not (marker.is_file() and marker.read_text() == layout.marker):
        need = layout.total * 4096 * 1.2  # a block each, and the directories
        free = shutil.disk_usage(harness.CORPUS_ROOT).free
        if need > free * 0.9:
            harness.fail(f"the corpus needs about {need / 1e9:.1f} GB and the disk has {free / 1e9:.1f} GB free")
    generated = corpus_generate(directory, layout)
    if generated is None:
        print(f"corpus directory {directory}: reused ({layout.total} entries, {layout.invalid} invalid)")
    else:
        print(f"corpus directory {directory}: generated in {generated:.1f} s (not part of the measurement)")
    cleaned = harness.corpus_delete_if_exists(corpus_name)
    if cleaned is not None:
        print(f"removed the corpus left by an earlier run in {cleaned:.1f} s")

    harness.quiet_wait(args.max_load, args.wait)
    if args.cold:
        cache_drop()
    watched = [(actions, "corpus_import_run"), (actions, "_write_documents"), (scan, "entry_names")]
    with harness.phases_recorded(watched, generators=[(scan, "scan")]) as log, harness.timed() as total:
        job = actions.corpus_import(name=corpus_name, path=str(directory), actor=harness.ACTOR, send=False)
        state = job_run(job.pk)
    job.refresh_from_db()
    if state != "succeeded":
        harness.fail(f"the import job ended {state}: {job.message}")
    counts_check(corpus_name, layout, job.result or {})

    run = log.seconds("corpus_import_run")
    write = log.seconds("_write_documents")
    commit = log.ends["corpus_import_run"] - log.ends["_write_documents"]
    write_statements = log.statements_between(log.starts["_write_documents"], log.ends["_write_documents"])
    print("phases:")
    print(f"  list entries       {log.seconds('entry_names'):8.3f} s")
    print(f"  scan (inspect)     {log.seconds('scan'):8.3f} s  ({layout.total / log.seconds('scan'):,.0f} entries/s)")
    print(f"  write documents    {write:8.3f} s  (COPY = the rest after these statements)")
    print("\n".join(harness.statement_lines(write_statements)))
    copy = write - sum(seconds for seconds, _ in write_statements)
    print(f"    {copy:8.3f} s  COPY import_entries FROM STDIN (by difference)")
    print(f"  commit + state     {commit:8.3f} s  (deferred constraint checks, if any, run here)")
    print(f"  job body           {run:8.3f} s")
    print(f"  job overhead       {total.seconds - run:8.3f} s  (create corpus + job, claim, finish)")
    print(f"end: {harness.load_line()}")
    verdict = "met" if total.seconds <= target else "MISSED"
    print(
        f"import of {layout.total:,} entries: {total.seconds:.1f} s total, {layout.total / total.seconds:,.0f} "
        f"documents/s (target <= {target:.0f} s: {verdict})"
    )

    if not args.keep:
        with harness.timed() as deleted:
            actions.corpus_delete(name=corpus_name, confirm=corpus_name, actor=harness.ACTOR)
        print(f"corpus_delete: {deleted.seconds:.1f} s (no target)")


if __name__ == "__main__":
    main()
