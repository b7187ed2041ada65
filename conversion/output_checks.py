"""Output checks: what a conversion's HTML lost against its TeX source, which LaTeXML's own log may not say
(docs/decisions/output-checks.md). Pure library, standard library only.

After a conversion that finished (its status better than fatal), the worker compares the HTML with the
source and writes each failed check into the log as a message of its own category (Category.OUTPUT_*),
followed by a status line no better than the worst check's severity, so an empty document is never
no_problem. The checks:

- `output_empty:body`: no HTML was written, or it has no text, math or graphics at all, or a tenth of its
  source's text;
- `output_math:lost`: far fewer math elements than the source has math;
- `output_bibliography:missing`: the source cites, and the output has no bibliography entry;
- `output_figures:missing`: graphics the source includes are absent from the output, or the output points
  at image files that it does not hold;
- `output_errors:nodes`: the output shows LaTeXML's error nodes (`ltx_ERROR`) to the reader.

Sources and outputs come from untrusted documents: every read is bounded (bytes, files, nesting), only
regular files inside the source's root are read, the scans are linear regular expressions and string
searches, and nothing raises on any content.
"""

from __future__ import annotations

import html as html_module
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TypeVar
from urllib.parse import unquote

from conversion.choices import Category, LatexmlStatus, Severity

# The TeX a check reads: the main file and what it \input's, at most this much in all, this many files,
# this deep; the HTML: at most this much (a longer one is checked only for what a prefix can show).
SOURCE_MAX_BYTES = 8 * 1024 * 1024
SOURCE_MAX_FILES = 200
SOURCE_MAX_DEPTH = 8
HTML_MAX_BYTES = 32 * 1024 * 1024

# The document is empty with no text, math or graphics at all, and near-empty below NEAR_EMPTY_SHARE of the
# source's text when the source has at least NEAR_EMPTY_SOURCE_CHARS of it.
NEAR_EMPTY_SHARE = 0.1
NEAR_EMPTY_SOURCE_CHARS = 1000
# Math is lost when the source has at least MATH_MIN pieces and the output fewer than MATH_KEPT_SHARE of them.
MATH_MIN = 10
MATH_KEPT_SHARE = 0.5
# How many names or snippets a message's details list.
EXAMPLES = 5

_STATUS_OF = {Severity.WARNING: LatexmlStatus.WARNING, Severity.ERROR: LatexmlStatus.ERROR}


@dataclass(frozen=True)
class Finding:
    """One failed check, as the log message it becomes."""

    severity: Severity
    category: Category
    what: str
    details: str

    @property
    def line(self) -> str:
        details = " ".join(self.details.split())
        return f"{self.severity.value.capitalize()}:{self.category.value}:{self.what} {details}"


# --- the source -----------------------------------------------------------------------------------------

_COMMENT = re.compile(r"%[^\n]*")
_BEGIN_DOCUMENT = re.compile(r"\\begin\s*\{document\}")
_END_DOCUMENT = re.compile(r"\\end\s*\{document\}")
_INPUT = re.compile(
    r"\\(?:input|include|subfile|subinputfrom|subincludefrom|import|subimport|inputfrom|includefrom)\*?"
    r"\s*(?:\{([^{}\n]{0,300}+)\}\s*)?\{([^{}\n]{1,300}+)\}"
    r"|\\input\s+([^\s{}\\%]{1,300}+)"
)
_VERBATIM_NAMES = ("verbatim", "Verbatim", "lstlisting", "minted", "comment", "alltt")
_VERB = re.compile(r"\\verb\*?([^A-Za-z\s*])[^\n]{0,200}?\1")
_MATH_ENVIRONMENT = re.compile(
    r"\\begin\s*\{(?:equation|align|alignat|flalign|xalignat|gather|multline|eqnarray|displaymath|math|dmath"
    r"|dgroup|subequations)\*?\}"
)
# A command and what follows it up to its argument's brace; its name says whether it cites.
_COMMAND_NAME = re.compile(r"\\([A-Za-z]++)")
_INCLUDEGRAPHICS = re.compile(r"\\includegraphics\*?\s*(?:\[[^\]]{0,500}+\]\s*)?\{([^{}\n]{0,300}+)\}")
_COMMAND = re.compile(r"\\(?:[A-Za-z@]+\*?|.)")
_TEX_NOISE = re.compile(r"[{}\[\]$&^_~#\s]+")


@dataclass(frozen=True)
class Source:
    """What the checks need of a document's TeX: its body's math, citations, graphics and text, counted."""

    math: int
    citations: int
    graphics: list[str]
    text_chars: int


def read_source(source_dir: Path, main_file: str, *, root: Path | None = None) -> str:
    """The body of `main_file` (after \\begin{document}) and of every file it inputs there, comments left out,
    read within the bounds above; files outside `root` (source_dir by default), links and anything but a
    regular file are not read."""
    source_dir = Path(source_dir)
    root_path = Path(root if root is not None else source_dir).resolve()
    budget = [SOURCE_MAX_BYTES, SOURCE_MAX_FILES]
    seen: set[Path] = set()
    main = _read_tex(source_dir / main_file, root_path, budget, seen)
    if main is None:
        return ""
    body = _body(main)
    parts: list[str] = []
    _collect(body, source_dir, root_path, budget, seen, parts, depth=0)
    return "\n".join(parts)


def _uncommented(text: str) -> str:
    """TeX without its comments, and without its `\\\\` (a line break) and `\\%`, which become spaces: after
    this, every backslash left begins a command or an escape of its own (`\\\\[2pt]` is no display math), and
    every % begins a comment. Only str.replace and a regular expression that starts at a fixed character."""
    return _COMMENT.sub("", text.replace("\\\\", "  ").replace("\\%", "  "))


def _body(main: str) -> str:
    """A main file's text between \\begin{document} and \\end{document} (TeX reads nothing after it)."""
    begin = _BEGIN_DOCUMENT.search(main)
    body = main[begin.end() :] if begin else main
    end = _END_DOCUMENT.search(body)
    return body[: end.start()] if end else body


def _collect(
    text: str, base: Path, root: Path, budget: list[int], seen: set[Path], parts: list[str], depth: int
) -> None:
    parts.append(text)
    if depth >= SOURCE_MAX_DEPTH:
        return
    for match in _INPUT.finditer(text):
        if budget[0] <= 0 or budget[1] <= 0:
            return
        folder, name = (match.group(1) or ""), (match.group(2) or match.group(3) or "").strip()
        if not name:
            continue
        for candidate in (name, name + ".tex"):
            path = base / folder.strip() / candidate
            included = _read_tex(path, root, budget, seen)
            if included is not None:
                _collect(included, base, root, budget, seen, parts, depth + 1)
                break


def _read_tex(path: Path, root: Path, budget: list[int], seen: set[Path]) -> str | None:
    """A TeX file's text without comments, or None when it cannot or must not be read."""
    try:
        resolved = path.resolve()
        if not resolved.is_relative_to(root) or resolved in seen:
            return None
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (OSError, ValueError, RuntimeError):
        return None
    try:
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(max(budget[0], 0))
    except OSError:
        return None
    seen.add(resolved)
    budget[0] -= len(data)
    budget[1] -= 1
    return _uncommented(data.decode("utf-8", errors="replace"))


def _without_verbatim(text: str) -> str:
    """`text` without verbatim-like environments (an unclosed one runs to the end), in one pass."""
    kept: list[str] = []
    position = 0
    while True:
        start = text.find("\\begin{", position)
        if start < 0:
            break
        close = text.find("}", start + 7, start + 40)
        name = text[start + 7 : close].rstrip("*") if close > 0 else ""
        if name not in _VERBATIM_NAMES:
            kept.append(text[position : start + 7])
            position = start + 7
            continue
        kept.append(text[position:start])
        end = text.find("\\end{" + name, close)
        if end < 0:
            position = len(text)
            break
        position = end + 5
    kept.append(text[position:])
    return _VERB.sub(" ", "".join(kept))


def analyse_tex(tex: str) -> Source:
    """analyse_source of a whole document given as text (POST /convert): its body, comments left out."""
    return analyse_source(_body(_uncommented(tex[:SOURCE_MAX_BYTES])))


def analyse_source(body: str) -> Source:
    """Count the math, citations and graphics of a document body (read_source's text) and estimate its text."""
    text = _without_verbatim(body)
    text = text.replace("\\$", "  ")  # an escaped dollar; `\\\\` went in _uncommented, so none is mistaken
    displays = text.count("$$")
    math = displays // 2 + (text.count("$") - 2 * displays) // 2 + text.count("\\(") + text.count("\\[")
    math += len(_MATH_ENVIRONMENT.findall(text))
    graphics = [match.group(1).strip() for match in _INCLUDEGRAPHICS.finditer(text)]
    words = _TEX_NOISE.sub(" ", _COMMAND.sub(" ", text))
    citations = sum(1 for name in _COMMAND_NAME.findall(text) if "cite" in name.lower() or name == "bibentry")
    return Source(math=math, citations=citations, graphics=graphics, text_chars=len(words.replace(" ", "")))


# --- the output -----------------------------------------------------------------------------------------

_SPACES = (" ", "\n", "\t", "\r", "\f", "\v", "\xa0")
# How far before a class value its tag may open (LaTeXML's tags put the class near their start).
_TAG_REACH = 2048
# A tag never holds a '<' (LaTeXML escapes it in attributes), so a stray one costs one step, not a rescan.
_TAG = re.compile(r"<[^<>]*>")
_ENTITY = re.compile(r"&[#A-Za-z0-9]{1,10};")
_IMG = re.compile(r"<img\s[^<>]*>", re.IGNORECASE)
_SRC = re.compile(r"""\ssrc\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_GRAPHIC_NODE = re.compile(r"<(?:img|svg|object|embed)[\s>]", re.IGNORECASE)
_FOOTER = re.compile(r"<footer\s[^>]*ltx_page_footer", re.IGNORECASE)


@dataclass(frozen=True)
class Output:
    """What the checks need of a document's HTML."""

    math: int
    text_chars: int
    graphics: int  # img, svg, object and embed elements of the document (the footer's logo left out)
    images: list[str]  # the src of each img that points at a file of the result
    bibitems: int
    errors: list[str]  # the start of each ltx_ERROR node's text
    complete: bool  # False when only a prefix was read


def analyse_output(html: str, *, complete: bool = True) -> Output:
    """Count what a LaTeXML HTML page holds: math, text, graphics, bibliography entries and error nodes."""
    start = html.find("<body")
    body = html[start:] if start >= 0 else html
    footer = _FOOTER.search(body)
    if footer:
        body = body[: footer.start()]
    math = body.count("<math ") + body.count("<math>")
    text = _ENTITY.sub(
        "x", _TAG.sub("", _cut(_cut(_cut(body, "<script", "</script>"), "<style", "</style>"), "<math", "</math>"))
    )
    text_chars = len(text) - sum(text.count(space) for space in _SPACES)
    images = []
    for tag in _IMG.findall(body):
        src = _SRC.search(tag)
        value = (src.group(1) or src.group(2) or "").strip() if src else ""
        if value and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", value):  # data:, http:, ... are no files
            images.append(value)
    return Output(
        math=math, text_chars=text_chars, graphics=len(_GRAPHIC_NODE.findall(body)), images=images,
        bibitems=body.count("ltx_bibitem"), errors=_error_nodes(body),
        complete=complete,
    )  # fmt: skip


def _cut(text: str, opener: str, closer: str) -> str:
    """`text` without its spans from `opener` to `closer` (an unclosed one runs to the end), in one pass."""
    kept: list[str] = []
    position = 0
    while (start := text.find(opener, position)) >= 0:
        kept.append(text[position:start])
        end = text.find(closer, start)
        position = len(text) if end < 0 else end + len(closer)
    kept.append(text[position:])
    return " ".join(kept)


def _error_nodes(body: str) -> list[str]:
    """The start of the text of each element whose class is ltx_ERROR, in one pass."""
    found: list[str] = []
    position = 0
    while (at := body.find("ltx_ERROR", position)) >= 0:
        position = at + 9
        # A class value: inside a tag (no '>' since its '<'), the word whole ("ltx_ERROR" then space or quote).
        if body[at - 1 : at] not in ('"', " ") or body[position : position + 1] not in ('"', " "):
            continue
        window = max(0, at - _TAG_REACH)
        if body.rfind("<", window, at) <= body.rfind(">", window, at):
            continue
        close = body.find(">", position)
        if close < 0:
            break
        text = body[close + 1 : close + 61]
        found.append(" ".join(text.split("<", 1)[0].split()))
        position = close + 1
    return found


# --- the checks -----------------------------------------------------------------------------------------


def check(
    output: Output | None, source: Source, *, status_code: int, present: Callable[[str], bool] | None = None
) -> list[Finding]:
    """The failed checks of an output (None: no HTML was written) against its source, for a conversion whose
    LaTeXML status code is `status_code`; `present(src)` says whether an image the output points at is in the
    result (not asked when None)."""
    if output is None:
        return [Finding(Severity.ERROR, Category.OUTPUT_EMPTY, "body", "the conversion wrote no HTML document")]
    found: list[tuple[Severity, Category, str, str]] = []
    if output.text_chars == 0 and output.math == 0 and output.graphics == 0:
        said = f"the document is empty: no text, math or graphics (the source has ~{source.text_chars} characters)"
        found.append((Severity.ERROR, Category.OUTPUT_EMPTY, "body", said))
    elif (
        output.complete
        and source.text_chars >= NEAR_EMPTY_SOURCE_CHARS
        and output.text_chars < NEAR_EMPTY_SHARE * source.text_chars
    ):
        said = f"the document is near-empty: {output.text_chars} characters of text, ~{source.text_chars} in the source"
        found.append((Severity.ERROR, Category.OUTPUT_EMPTY, "body", said))
    if found:  # what an empty document lost besides is no news
        return [Finding(*finding) for finding in found]
    if output.complete and source.math >= MATH_MIN and output.math < MATH_KEPT_SHARE * source.math:
        said = f"{output.math} math elements in the output against {source.math} pieces of math in the source"
        found.append((Severity.ERROR, Category.OUTPUT_MATH, "lost", said))
    if output.complete and source.citations and not output.bibitems:
        commands = "citation command" + ("s" if source.citations != 1 else "")
        said = f"the source has {source.citations} {commands} and the output no bibliography entry"
        found.append((Severity.WARNING, Category.OUTPUT_BIBLIOGRAPHY, "missing", said))
    absent = [src for src in output.images if present is not None and not present(src)]
    lacking = len(source.graphics) - output.graphics if output.complete else 0
    if absent or lacking > 0:
        parts = [f"{output.graphics} graphics in the output against {len(source.graphics)} \\includegraphics in the"
                 f" source"] if lacking > 0 else []  # fmt: skip
        if absent:
            parts.append(f"{len(absent)} images the output shows are not in the result: {_examples(absent)}")
        found.append((Severity.WARNING, Category.OUTPUT_FIGURES, "missing", "; ".join(parts)))
    # LaTeXML logs an error for each node it makes; only nodes that its status does not own up to are news.
    if output.errors and status_code < LatexmlStatus.ERROR:
        said = f"{len(output.errors)} error nodes (ltx_ERROR) in the output: {_examples(output.errors)}"
        found.append((Severity.ERROR, Category.OUTPUT_ERRORS, "nodes", said))
    return [Finding(*finding) for finding in found]


def _examples(items: list[str]) -> str:
    shown = ", ".join(item[:60] for item in items[:EXAMPLES])
    return shown + (", ..." if len(items) > EXAMPLES else "")


def log_lines(findings: list[Finding]) -> list[str]:
    """The log lines of `findings`: one message each, then a status line of the worst severity among them
    (the status is the worst status line of a log, so this makes it no better than that; none without findings)."""
    if not findings:
        return []
    worst = max(_STATUS_OF[finding.severity] for finding in findings)
    return [finding.line for finding in findings] + [f"Status:conversion:{worst.value}"]


def check_conversion(
    source_dir: Path, main_file: str, output_dir: Path | None, *, status_code: int, root: Path | None = None
) -> list[str]:
    """The log lines of the checks of a finished conversion of `main_file` (relative to `source_dir`, inside
    `root`) whose HTML latexmlc wrote to `output_dir` as `<stem>.html` (engine.convert's layout), with LaTeXML
    status code `status_code`. Never raises on the content of either; an unreadable output counts as none."""
    html: str | None = None
    complete = True
    if output_dir is not None:
        data = _read_bounded(Path(output_dir) / (PurePath(main_file).stem + ".html"), HTML_MAX_BYTES + 1)
        if data is not None:
            complete = len(data) <= HTML_MAX_BYTES
            html = data[:HTML_MAX_BYTES].decode("utf-8", errors="replace")
    source = analyse_source(read_source(source_dir, main_file, root=root))
    output = analyse_output(html, complete=complete) if html is not None else None
    base = Path(output_dir).resolve() if output_dir is not None else None

    def present(src: str) -> bool:
        if base is None:
            return True
        try:
            path = unquote(html_module.unescape(src).split("?")[0].split("#")[0])
            target = (base / path).resolve()
            return target.is_relative_to(base) and target.is_file()
        except (OSError, ValueError, RuntimeError):
            return False

    return log_lines(check(output, source, status_code=status_code, present=present))


# An answer of engine.convert_text or of the warm engine (conversion.warm), as checked_text takes it.
_Answer = TypeVar("_Answer", bound=Mapping[str, object])


def checked_text(converted: _Answer, tex: str) -> _Answer | dict[str, object]:
    """engine.convert_text's answer for a whole document (`tex`, as given) with the output checks' lines appended
    to its log and its status made no better than theirs; a fatal answer is returned as it is. The images of
    such a conversion are not kept, so whether the files an image points at exist is not asked."""
    code = converted.get("status_code")
    if not isinstance(code, int) or code >= LatexmlStatus.FATAL:
        return converted
    html = str(converted.get("result") or "")
    output = analyse_output(html[:HTML_MAX_BYTES], complete=len(html) <= HTML_MAX_BYTES) if html.strip() else None
    lines = log_lines(check(output, analyse_tex(tex), status_code=code, present=None))
    if not lines:
        return converted
    log = str(converted.get("log") or "")
    code = max(code, int(lines[-1].rsplit(":", 1)[1]))
    return {**converted, "log": log + ("" if not log or log.endswith("\n") else "\n") + "\n".join(lines) + "\n",
            "status": LatexmlStatus(code).key, "status_code": code}  # fmt: skip


def _read_bounded(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of a regular file (not through a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read(limit)
    except OSError:
        return None
