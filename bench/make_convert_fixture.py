"""Make tests/fixtures/convert: formulas and fragments of real papers, each with the answer a cold latexmlc
gives to it through `POST /convert`, kept in the normalised form of tests/conversion/convert_answers.py.
tests/conversion/test_convert_fixture.py checks a sample of them against a live cold latexmlc, and an
engine that answers /convert otherwise (a warm one) can be held to all of them.

The papers are the entries of --corpus (gzipped or plain tars, zips or directories). In each, the main file
(the .tex with \\documentclass and \\begin{document}) is read with the files it \\input or \\include put in
place, comments, verbatim text and pictures taken out, from \\begin{document} to \\end{document}.

Formulas: the math of that text ($..$, \\(..\\), \\[..\\], $$..$$ and the bodies of equation, align, gather
and multline, starred or not), distinct, at most MAX_FORMULA_CHARS long. They are taken in a fixed order,
one paper after the other in rounds, each paper's formulas in turn from five length classes (a symbol to
many lines) and within a class in the order of their SHA-1, and converted in that order. A formula is kept
while there is room for it: --formulas in all, CLASS_SHARE of them at most of one length class, and
ERROR_SHARE at most with errors (status error or fatal: the paper's own macros, a package the paper loads
and a bare conversion does not, an align's & in the inline math that a formula is converted as), spread
evenly over the length classes. So the choice depends only on the corpus and on LaTeXML's answers.

Fragments: runs of consecutive paragraphs of prose (no sectioning, environments, display math, figures,
labels or alignment; at most one citation and one reference each) with inline math. PAGE_FRAGMENTS of them
are about a printed page (PAGE_CHARS) from the first papers that have one; then each paper gives one of a
size from SMALL_TARGETS in turn. Of the runs of a size, the one is taken that uses the fewest macros the
paper defines itself or takes from a package (PACKAGE_COMMANDS), so that more fragments convert without
errors (those of papers that use their macros everywhere still carry them), then the one with the most
inline math.

Each item is converted as /convert converts it (conversion.engine.convert_text, format html5, timeout 60,
the default sandbox; formulas math to math with presentation MathML, fragments fragment to fragment), two
at a time, and then once more: an item whose two normalised answers differ stops the script before it
writes anything, as the fixture could not hold that answer (--no-check leaves the second round out).

Run: .venv/bin/python bench/make_convert_fixture.py [--corpus ../shared/corpora/real]
     [--out tests/fixtures/convert] [--formulas 240] [--no-check] [--list]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import posixpath
import re
import sys
import tarfile
import time
import zipfile
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from conversion import engine, sandbox  # noqa: E402
from tests.conversion.convert_answers import normalised  # noqa: E402

MAX_FORMULA_CHARS = 2000
FORMULAS = 240
ERROR_SHARE = 0.15
# At most this share of the formulas comes from one length class.
CLASS_SHARE = 0.25
# A formula's length class, by the upper bound of its characters: a symbol, a term, an expression, an
# equation, many lines.
LENGTH_CLASSES = (3, 20, 80, 300, MAX_FORMULA_CHARS)
PAGE_FRAGMENTS = 4
PAGE_CHARS = (3000, 4000)
SMALL_TARGETS = (250, 600, 1200, 2000)
# A small fragment may be this much shorter or longer than its target.
SMALL_SLACK = (0.6, 1.4)
MIN_PARAGRAPH_CHARS = 120
CONVERSIONS_AT_ONCE = 2
TIMEOUT_SECONDS = 60
FORMULA_REQUEST = {"whatsin": "math", "whatsout": "math", "format": "html5", "pmml": True, "timeout": TIMEOUT_SECONDS}
FRAGMENT_REQUEST = {"whatsin": "fragment", "whatsout": "fragment", "format": "html5", "timeout": TIMEOUT_SECONDS}
FIXTURE_MAX_BYTES = 2_000_000

MATH_ENVIRONMENTS = {
    f"{name}{star}" for name in ("equation", "align", "gather", "multline") for star in ("", "*")
}  # fmt: skip
# Environments whose content is not text and math to read: code, comments, pictures (TikZ's coordinates
# look like math: "($(a)!0.5!(b)$)").
NOT_TEXT = ("verbatim", "Verbatim", "lstlisting", "minted", "comment", "alltt", "tikzpicture", "pgfpicture", "tikzcd")
_NOT_TEXT = re.compile(r"\\begin\{(" + "|".join(NOT_TEXT) + r")\*?\}.*?\\end\{\1\*?\}", re.DOTALL)
_INPUT = re.compile(r"\\(?:input|include|subfile)\s*(?:\{([^{}]*)\}|([^\s{}\\%]+))")
_SOURCES = (".tex", ".sty")
# What defines a control sequence: \newcommand{\x}, \def\x, \DeclareMathOperator*{\x}, \let\x ...
_DEFINITION = re.compile(
    r"\\(?:(?:re|provide)?newcommand|DeclareMathOperator|DeclareRobustCommand|[egx]?def|let)\*?\s*\{?\s*\\([A-Za-z]+)"
)
# Commands of packages that papers load and a bare conversion does not (natbib, cleveref, amsmath, hyperref,
# todonotes): a fragment that uses them is as likely to carry errors as one with the paper's own macros.
PACKAGE_COMMANDS = frozenset(
    ("citep", "citet", "citealp", "citealt", "citeauthor", "citeyear", "shortcite", "cref", "Cref", "eqref", "text",
     "dotsc", "xrightarrow", "hyperlink", "todo")
)  # fmt: skip
_CONTROL_SEQUENCE = re.compile(r"\\([A-Za-z]+)")
_BRACE = re.compile(r"\\.|[{}]", re.DOTALL)
_BEGIN = re.compile(r"\\begin\{([A-Za-z*]+)\}")
_ENVIRONMENT_BEGIN = re.compile(r"\\begin\{")
_ENVIRONMENT_END = re.compile(r"\\end\{")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# What a fragment leaves out: sectioning, environments, figures, labels, floats' and front matter's
# commands, definitions, inputs.
_NOT_PROSE = re.compile(
    r"\\(begin|end|part|chapter|section|subsection|subsubsection|paragraph|subparagraph|caption|includegraphics"
    r"|item|label|maketitle|title|author|affiliation|thanks|bibliography|bibliographystyle|appendix|newcommand"
    r"|renewcommand|providecommand|def|let|input|include|newpage|clearpage|noindent\s*\\textbf|iffalse|vspace"
    r"|hspace|centering|hline|makeatletter|usepackage)(?![A-Za-z])"
)
_CITE = re.compile(r"\\[A-Za-z]*cite[A-Za-z]*\*?(?![A-Za-z])")
_REF = re.compile(r"\\[A-Za-z]*ref(?![A-Za-z])")
_ALIGNMENT_TAB = re.compile(r"(?<!\\)&")
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)|\\\(")


@dataclass(frozen=True)
class Paper:
    name: str
    body: str  # from \begin{document} to \end{document}, inputs in place, without comments, verbatim text or pictures
    macros: frozenset[str]  # the control sequences its .tex and .sty files define, without the backslash


@dataclass(frozen=True)
class Item:
    id: str
    paper: str
    kind: str  # a formula's delimiters or environment ("$", "\\[", "align*", ...); a fragment's "page" or "paragraphs"
    tex: str


def papers_read(corpus: Path) -> list[Paper]:
    """Every paper of the corpus directory whose main file is found, in the order of the entries' names."""
    papers = []
    for entry in sorted(corpus.iterdir()):
        files = _tex_files(entry)
        if not files:
            continue
        body = _paper_body(files)
        if body is None:
            print(f"  {entry.name}: no main file with \\documentclass and \\begin{{document}}; left out")
            continue
        macros = frozenset(name for text in files.values() for name in _DEFINITION.findall(text))
        papers.append(Paper(name=_entry_name(entry), body=body, macros=macros))
    return papers


def _entry_name(entry: Path) -> str:
    for suffix in (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip"):
        if entry.name.endswith(suffix):
            return entry.name[: -len(suffix)]
    return entry.name


def _tex_files(entry: Path) -> dict[str, str]:
    """The .tex and .sty files of a corpus entry (a tar, a zip or a directory) by their path inside it."""
    found: dict[str, bytes] = {}
    if entry.is_dir():
        for path in sorted(entry.rglob("*")):
            if path.suffix in _SOURCES and path.is_file():
                found[path.relative_to(entry).as_posix()] = path.read_bytes()
    elif zipfile.is_zipfile(entry):
        with zipfile.ZipFile(entry) as archive:
            for info in archive.infolist():
                if info.filename.endswith(_SOURCES) and not info.is_dir():
                    found[info.filename] = archive.read(info)
    elif entry.is_file() and _is_tar(entry):
        with tarfile.open(entry) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.endswith(_SOURCES):
                    handle = archive.extractfile(member)
                    if handle is not None:
                        found[posixpath.normpath(member.name)] = handle.read()
    return {name: data.decode("utf-8", errors="replace") for name, data in found.items()}


def _is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


def without_comments(tex: str) -> str:
    """TeX without its comments: a line that is only a comment goes, with its line end; elsewhere what
    follows an unescaped % goes."""
    lines = []
    for line in tex.splitlines():
        cut = _comment_start(line)
        if cut is None:
            lines.append(line)
        elif line[:cut].strip():
            lines.append(line[:cut])
    return "\n".join(lines)


def _comment_start(line: str) -> int | None:
    index = 0
    while True:
        index = line.find("%", index)
        if index < 0:
            return None
        backslashes = len(line[:index]) - len(line[:index].rstrip("\\"))
        if backslashes % 2 == 0:
            return index
        index += 1


def _paper_body(files: dict[str, str]) -> str | None:
    texts = {name: without_comments(text) for name, text in files.items() if name.endswith(".tex")}
    mains = sorted(
        (name for name, text in texts.items() if "\\documentclass" in text and "\\begin{document}" in text),
        key=lambda name: (name.count("/"), -len(texts[name]), name),
    )
    if not mains:
        return None
    main = mains[0]
    whole = _inputs_in_place(texts[main], texts, posixpath.dirname(main), depth=0)
    start = whole.find("\\begin{document}")
    end = whole.find("\\end{document}", start)
    body = whole[start + len("\\begin{document}") : end if end >= 0 else len(whole)]
    return _NOT_TEXT.sub("", body)


def _inputs_in_place(text: str, texts: dict[str, str], base: str, depth: int) -> str:
    """`text` with each \\input or \\include of a file of the paper replaced by that file's text."""
    if depth > 8:
        return text

    def replace(match: re.Match) -> str:
        name = (match.group(1) or match.group(2) or "").strip()
        for candidate in (name, f"{name}.tex"):
            path = posixpath.normpath(posixpath.join(base, candidate))
            if path in texts and path.endswith(".tex"):
                return "\n" + _inputs_in_place(texts[path], texts, base, depth + 1) + "\n"
        return ""

    return _INPUT.sub(replace, text)


# Formulas


def formulas_of(body: str) -> Iterator[tuple[str, str]]:
    """The (kind, TeX) of each formula of a paper's body, in order of position."""
    index, size = 0, len(body)
    while index < size:
        char = body[index]
        if char == "\\":
            two = body[index : index + 2]
            begin = _BEGIN.match(body, index)
            if two in ("\\(", "\\["):
                close = "\\)" if two == "\\(" else "\\]"
                end = body.find(close, index + 2)
                if end < 0:
                    return
                yield two, body[index + 2 : end]
                index = end + 2
            elif begin is not None and begin.group(1) in MATH_ENVIRONMENTS:
                close = f"\\end{{{begin.group(1)}}}"
                end = body.find(close, begin.end())
                if end < 0:
                    return
                yield begin.group(1), body[begin.end() : end]
                index = end + len(close)
            else:
                index += 2
        elif char == "$":
            display = body.startswith("$$", index)
            start = index + (2 if display else 1)
            end = _math_end(body, start, "$$" if display else "$")
            if end is None:
                index = start
                continue
            yield ("$$" if display else "$"), body[start:end]
            index = end + (2 if display else 1)
        else:
            index += 1


def braces_balanced(tex: str) -> bool:
    """Whether every unescaped { of `tex` is closed in it, in order: a formula cut out of a larger one
    (math in \\text{..} inside math) is not."""
    depth = 0
    for token in _BRACE.findall(tex):
        if token in ("{", "}"):
            depth += 1 if token == "{" else -1
            if depth < 0:
                return False
    return depth == 0


def _math_end(body: str, start: int, close: str) -> int | None:
    """Where the unescaped `close` after `start` is; None when a paragraph ends first."""
    index = start
    while index < len(body):
        if body[index] == "\\":
            index += 2
        elif body.startswith(close, index):
            return index
        elif _PARAGRAPH_BREAK.match(body, index):
            return None
        else:
            index += 1
    return None


def formula_candidates(papers: list[Paper]) -> list[Item]:
    """Every distinct formula of the papers, in the order they are tried (the module's docstring)."""
    seen: set[str] = set()
    per_paper: list[list[tuple[str, str]]] = []
    for paper in papers:
        classes: list[list[tuple[str, str]]] = [[] for _ in LENGTH_CLASSES]
        for kind, tex in formulas_of(paper.body):
            tex = tex.strip()
            if not tex or len(tex) > MAX_FORMULA_CHARS or tex in seen or not braces_balanced(tex):
                continue
            seen.add(tex)
            classes[length_class(tex)].append((kind, tex))
        for members in classes:
            members.sort(key=lambda formula: hashlib.sha1(formula[1].encode(), usedforsecurity=False).hexdigest())
        per_paper.append([(paper.name, kind, tex) for kind, tex in _interleaved(classes)])
    return [Item(id="", paper=name, kind=kind, tex=tex) for name, kind, tex in _interleaved(per_paper)]


def _interleaved(lists: list[list]) -> Iterator:
    """The first of each list, then the second of each, and so on."""
    for round_ in range(max((len(members) for members in lists), default=0)):
        for members in lists:
            if round_ < len(members):
                yield members[round_]


# Fragments


def paragraphs_of(body: str) -> list[tuple[str, bool]]:
    """The paragraphs of a body, each with whether it stands outside every environment (an abstract, a
    proof, a figure or a picture whose paragraphs run on between its \\begin and \\end)."""
    paragraphs, depth = [], 0
    for paragraph in _PARAGRAPH_BREAK.split(body):
        if paragraph.strip():
            paragraphs.append((paragraph.strip(), depth == 0))
        depth = max(0, depth + len(_ENVIRONMENT_BEGIN.findall(paragraph)) - len(_ENVIRONMENT_END.findall(paragraph)))
    return paragraphs


def is_prose(paragraph: str) -> bool:
    """A paragraph a fragment may hold: prose, with or without inline math, nothing else (the module's
    docstring)."""
    inline = len(re.findall(r"(?<!\\)\$", paragraph))
    return (
        len(paragraph) >= MIN_PARAGRAPH_CHARS
        and inline % 2 == 0
        and "$$" not in paragraph
        and "\\[" not in paragraph
        and _NOT_PROSE.search(paragraph) is None
        and _ALIGNMENT_TAB.search(paragraph) is None
        and braces_balanced(paragraph)
        and len(_CITE.findall(paragraph)) <= 1
        and len(_REF.findall(paragraph)) <= 1
        and sum(char.isalpha() for char in paragraph) >= len(paragraph) / 2
    )


def _windows(paragraphs: list[tuple[str, bool]]) -> Iterator[tuple[range, str]]:
    """Each run of consecutive prose paragraphs (as their indexes and text), up to PAGE_CHARS's upper end."""
    prose = [outside and is_prose(paragraph) for paragraph, outside in paragraphs]
    texts = [paragraph for paragraph, _ in paragraphs]
    for start in range(len(texts)):
        end = start
        while end < len(texts) and prose[end]:
            text = "\n\n".join(texts[start : end + 1])
            if len(text) > PAGE_CHARS[1]:
                break
            yield range(start, end + 1), text
            end += 1


def _best_window(
    windows: Iterable[tuple[range, str]], low: float, high: float, taken: set[int], macros: frozenset[str]
) -> tuple[range, str] | None:
    """The window of low to high characters, apart from those taken, that uses the fewest of the paper's
    own macros and PACKAGE_COMMANDS and then holds the most inline math; None when there is none."""
    fitting = [
        (at, text)
        for at, text in windows
        if low <= len(text) <= high and taken.isdisjoint(at) and _INLINE_MATH.search(text) is not None
    ]

    def preference(window: tuple[range, str]) -> tuple[int, int, int]:
        own = len((macros | PACKAGE_COMMANDS).intersection(_CONTROL_SEQUENCE.findall(window[1])))
        return (-own, len(_INLINE_MATH.findall(window[1])), -window[0].start)

    return max(fitting, key=preference, default=None)


def fragment_choice(papers: list[Paper]) -> list[Item]:
    """The fragments (the module's docstring): the page-sized ones first, then one of each paper."""
    chosen: list[Item] = []
    taken: dict[str, set[int]] = {paper.name: set() for paper in papers}
    windows = {paper.name: list(_windows(paragraphs_of(paper.body))) for paper in papers}
    for paper in papers:
        if sum(item.kind == "page" for item in chosen) == PAGE_FRAGMENTS:
            break
        window = _best_window(windows[paper.name], *PAGE_CHARS, taken[paper.name], paper.macros)
        if window is not None:
            taken[paper.name].update(window[0])
            chosen.append(Item(id="", paper=paper.name, kind="page", tex=window[1]))
    for number, paper in enumerate(papers):
        target = SMALL_TARGETS[number % len(SMALL_TARGETS)]
        for size in sorted(SMALL_TARGETS, key=lambda size: abs(size - target)):
            low, high = size * SMALL_SLACK[0], size * SMALL_SLACK[1]
            window = _best_window(windows[paper.name], low, high, taken[paper.name], paper.macros)
            if window is not None:
                taken[paper.name].update(window[0])
                chosen.append(Item(id="", paper=paper.name, kind="paragraphs", tex=window[1]))
                break
    return sorted(chosen, key=lambda item: (item.paper, len(item.tex)))


# Conversion


def converted(item: Item, request: dict) -> dict:
    """The item's answer as /convert gives it (services.convert: conversion.engine.convert_text), normalised."""
    answer = engine.convert_text(item.tex, sandbox=sandbox.DEFAULT, **request)
    return normalised(answer)


def in_order(items: Iterable[Item], request: dict, pool: ThreadPoolExecutor) -> Iterator[tuple[Item, dict]]:
    """Each item with its answer, in the items' order, converted CONVERSIONS_AT_ONCE at a time and a few
    ahead; the ones not yet asked for when the caller stops are not converted."""
    ahead: deque[tuple[Item, Future]] = deque()
    source = iter(items)
    try:
        while True:
            while len(ahead) < 2 * CONVERSIONS_AT_ONCE:
                item = next(source, None)
                if item is None:
                    break
                ahead.append((item, pool.submit(converted, item, request)))
            if not ahead:
                return
            item, future = ahead.popleft()
            yield item, future.result()
    finally:
        for _, future in ahead:
            future.cancel()


def length_class(tex: str) -> int:
    return next(number for number, bound in enumerate(LENGTH_CLASSES) if len(tex) <= bound)


def formulas_kept(candidates: list[Item], count: int, pool: ThreadPoolExecutor) -> tuple[list[tuple], int]:
    """The first `count` candidates that have room (the module's docstring), with their answers, and how many
    candidates were converted to find them. A candidate whose length class is full when its turn to be
    converted comes is passed over unconverted; one converted meanwhile is not kept."""
    room_for_errors = round(count * ERROR_SHARE)
    room_for_errors_in_class = math.ceil(room_for_errors / len(LENGTH_CLASSES))
    room_in_class = round(count * CLASS_SHARE)
    kept: list[tuple[Item, dict]] = []
    in_class: Counter[int] = Counter()
    errors_in_class: Counter[int] = Counter()
    tried = 0
    # in_order takes the next candidate after each answer it hands on, so what is passed over depends only on
    # the answers before it, not on how fast they came.
    with_room = (item for item in candidates if in_class[length_class(item.tex)] < room_in_class)
    for item, answer in in_order(with_room, FORMULA_REQUEST, pool):
        tried += 1
        errors = errors_in_class.total()
        number = length_class(item.tex)
        if in_class[number] == room_in_class:
            pass
        elif answer["status_code"] >= 2:
            if errors < room_for_errors and errors_in_class[number] < room_for_errors_in_class:
                errors_in_class[number] += 1
                in_class[number] += 1
                kept.append((item, answer))
        elif len(kept) - errors < count - room_for_errors:
            in_class[number] += 1
            kept.append((item, answer))
        if len(kept) == count:
            break
        if tried % 50 == 0:
            print(f"  {tried} formulas converted, {len(kept)} kept ({errors_in_class.total()} with errors)", flush=True)
    return kept, tried


def unstable(kept: list[tuple[Item, dict]], request: dict, pool: ThreadPoolExecutor) -> list[str]:
    """The ids of the items whose answer differs when converted again, each printed with what differs."""
    again = dict(pool.map(lambda pair: (pair[0].id, converted(pair[0], request)), kept))
    differing = []
    for item, answer in kept:
        if again[item.id] != answer:
            differing.append(item.id)
            print(f"{item.id} ({item.paper}) answers otherwise when converted again: {item.tex!r}")
            for key in answer:
                if answer[key] != again[item.id][key]:
                    print(f"  {key}, first:  {json.dumps(answer[key], ensure_ascii=False)[:3000]}")
                    print(f"  {key}, again:  {json.dumps(again[item.id][key], ensure_ascii=False)[:3000]}")
    return differing


def fixture_write(path: Path, version: str, request: dict, kept: list[tuple[Item, dict]]) -> int:
    document = {
        "latexml_version": version,
        "made_by": "bench/make_convert_fixture.py",
        "request": request,
        "items": [
            {"id": item.id, "paper": item.paper, "kind": item.kind, "tex": item.tex, "answer": answer}
            for item, answer in kept
        ],
    }
    text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


def numbered(kept: list[tuple[Item, dict]], prefix: str, order: Callable[[tuple], tuple]) -> list[tuple[Item, dict]]:
    ordered = sorted(kept, key=order)
    width = len(str(len(ordered)))
    return [
        (Item(id=f"{prefix}-{number:0{width}d}", paper=item.paper, kind=item.kind, tex=item.tex), answer)
        for number, (item, answer) in enumerate(ordered, 1)
    ]


def _tally(kept: list[tuple[Item, dict]]) -> str:
    statuses: dict[str, int] = {}
    for _, answer in kept:
        statuses[answer["status"]] = statuses.get(answer["status"], 0) + 1
    return ", ".join(f"{status} {count}" for status, count in sorted(statuses.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=PROJECT_ROOT.parent / "shared" / "corpora" / "real")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "tests" / "fixtures" / "convert")
    parser.add_argument("--formulas", type=int, default=FORMULAS)
    parser.add_argument("--no-check", action="store_true", help="leave out the second round of conversions")
    parser.add_argument("--list", action="store_true", help="print the candidates and fragments; convert nothing")
    args = parser.parse_args()

    started = time.monotonic()
    papers = papers_read(args.corpus)
    candidates = formula_candidates(papers)
    fragments = fragment_choice(papers)
    print(f"{len(papers)} papers, {len(candidates)} distinct formulas, {len(fragments)} fragments "
          f"({sum(len(item.tex) >= PAGE_CHARS[0] for item in fragments)} of a page)")  # fmt: skip
    if args.list:
        for item in candidates[: args.formulas * 2]:
            print(f"formula  {item.paper:45} {item.kind:9} {len(item.tex):5} {item.tex[:70]!r}")
        for item in fragments:
            print(f"fragment {item.paper:45} {item.kind:10} {len(item.tex):5} {item.tex[:60]!r}")
        return

    version = engine.engine_version(engine.latexmlc_path())
    print(f"converting with {version}")
    with ThreadPoolExecutor(CONVERSIONS_AT_ONCE) as pool:
        formulas, tried = formulas_kept(candidates, args.formulas, pool)
        if len(formulas) < args.formulas:
            sys.exit(f"only {len(formulas)} formulas found room of {args.formulas}: see ERROR_SHARE")
        position = {item: number for number, item in enumerate(candidates)}
        paper_order = {paper.name: number for number, paper in enumerate(papers)}
        formulas = numbered(formulas, "formula", lambda pair: (paper_order[pair[0].paper], position[pair[0]]))
        fragment_answers = numbered(
            list(in_order(fragments, FRAGMENT_REQUEST, pool)), "fragment", lambda pair: (paper_order[pair[0].paper],)
        )
        converted_at = time.monotonic()
        print(f"formulas: {tried} converted, {len(formulas)} kept: {_tally(formulas)}")
        print(f"fragments: {len(fragment_answers)}: {_tally(fragment_answers)}")
        print(f"first round: {converted_at - started:.0f} s")
        if not args.no_check:
            differing = unstable(formulas, FORMULA_REQUEST, pool) + unstable(fragment_answers, FRAGMENT_REQUEST, pool)
            print(f"second round: {time.monotonic() - converted_at:.0f} s")
            if differing:
                sys.exit(f"answers that differ when converted again (nothing written): {differing}")

    args.out.mkdir(parents=True, exist_ok=True)
    size = fixture_write(args.out / "formulas.json", version, FORMULA_REQUEST, formulas)
    size += fixture_write(args.out / "fragments.json", version, FRAGMENT_REQUEST, fragment_answers)
    print(f"wrote {args.out}/formulas.json and fragments.json: {size} bytes, in {time.monotonic() - started:.0f} s")
    if size > FIXTURE_MAX_BYTES:
        sys.exit(f"the fixture is {size} bytes, over {FIXTURE_MAX_BYTES}: keep fewer or shorter items")


if __name__ == "__main__":
    main()
