"""What LaTeXML's message categories mean, without Django: the specification's message taxonomy (its
warning, error and fatal tables) and the categories this system's own workers write, kept once here.

A meaning belongs to a (severity, category): the same category means different things at different
severities (`missing_file` is a package that cannot be loaded as a warning, and the main source as a
fatal). `what` says what a message's what names there: a file name, a command name, a token.
"""

from __future__ import annotations

from typing import NamedTuple

from conversion.choices import Category, Severity


class Meaning(NamedTuple):
    """What a message category means at one severity, and what its `what` names."""

    what: str
    meaning: str


_WARNING = {
    "expected": ("metadata name", "expected metadata absent (label targets, graphics sources, a missing numeric "
                 "argument treated as zero)"),
    "imageprocessing": ("operation", "empty image cannot be cropped; ignored"),
    "latex": ("warning name", "warning raised by the author of a raw package or class file"),
    "limitation": ("file name", "transform limitation in graphics post-processing; the operation may be ignored"),
    "malformed": ("labels", "no open node can take labels; labels dropped"),
    "misdefined": ("command name", "minor convention violation, e.g. a conditional macro not starting with \\if"),
    Category.MISSING_FILE: ("file name", "a style, class or definition file cannot be loaded: absent, or LaTeXML "
                            "has no binding for it and raw styles are not included"),
    "not_parsed": ("grammar roles", "the math grammar failed to build a tree; the message shows the lexemes around"),
    "perl": ("warn", "a warning of LaTeXML's own Perl code without a handler of its own"),
    "undefined": ("name", "an undefined construct of minor impact, commonly a counter"),
    "unexpected": ("construct", "unexpected in its context, with a clear recovery"),
    "uninitialized": ("variable", "a Perl warning about an uninitialized variable"),
    # Written by this system's output checks (conversion.output_checks), not by LaTeXML.
    Category.OUTPUT_BIBLIOGRAPHY: ("missing", "output check: the source cites, and the HTML has no bibliography "
                                   "entry (commonly a .bib without its .bbl); citations show as bare keys"),
    Category.OUTPUT_FIGURES: ("missing", "output check: graphics the source includes are not in the HTML, or the "
                              "HTML shows image files the result does not hold"),
}  # fmt: skip

_ERROR = {
    "expected": ("token", "a mandatory argument is missing; processing continues with an empty or default value"),
    "I/O": ("file name", "an auxiliary file is unreadable; ignored"),
    "imageprocessing": ("operation", "an image could not be read or scaled; it is not shown"),
    "latex": ("error name", "error raised by the author of a raw package or class file, usually from imperfect "
              "emulation"),
    "malformed": ("element name", "an element the output schema does not allow there; usually follows an earlier "
                  "error"),
    "misdefined": ("token", "a token meaningless in its context; usually ignored"),
    Category.MISSING_FILE: ("file name", "an auxiliary file of a binding cannot be read; usually treated as empty"),
    "pgfparse": ("pgfparse", "a graphics (pgf) expression could not be parsed"),
    "recursion": ("command name", "a macro expands into itself; the expansion is ignored"),
    "undefined": ("command name", "a command used before any definition, often from a missing package"),
    "unexpected": ("command or token", "wrong mode, wrong environment ending, or illegal content in a restricted "
                   "expansion"),
    # Written by this system's output checks (conversion.output_checks), not by LaTeXML.
    Category.OUTPUT_EMPTY: ("body", "output check: the conversion finished, and its HTML has (almost) no text, "
                            "math or graphics, or none was written"),
    Category.OUTPUT_MATH: ("lost", "output check: the HTML has far fewer math elements than the source has math "
                           "(under half)"),
    Category.OUTPUT_ERRORS: ("nodes", "output check: the HTML shows LaTeXML's error nodes (ltx_ERROR, red raw TeX) "
                             "to its readers"),
}  # fmt: skip

_FATAL = {
    "cortex": ("empty_result, missing_log or never_completed_with_retries", "the worker's result was empty or had no "
               "log; never_completed_with_retries is CorTeX's name for a task whose attempts all ended without a "
               "result, which reports count with the infrastructure failures"),
    "die": ("file name", "LaTeXML died in its own code, caught by another handler"),
    "expected": ("tokens", "the tokens a macro's argument signature needs were not found"),
    "I/O": ("unreadable", "a mandatory file could not be read"),
    "internal": ("recursion", "infinite recursion in expansion; hard abort"),
    Category.INVALID: ("reason", "the input cannot be converted: a binary main source, an archive without a main "
                       "source, or a result too large to keep; abort"),
    "misdefined": ("command name", "a macro's expansion is unusable, e.g. unbalanced braces"),
    Category.MISSING_FILE: ("file name", "the main source file is missing"),
    "perl": ("deep_recursion or die", "Perl's recursion depth was exceeded, or a critical error in LaTeXML's code, "
             "usually after lighter errors; hard abort"),
    "timeout": ("timedout", "the conversion exceeded its timeout; aborted"),
    "too_many_errors": ("100", "100 errors end the conversion early, with no output"),
    "unexpected": ("endgroup", "too many closing groups; the last was locked"),
    # Written by this system's workers, not by LaTeXML.
    Category.LIMIT: ("limit", "the conversion was stopped at one of its own limits (memory, disk, processes)"),
    Category.INFRASTRUCTURE: ("reason", "the machine ended the conversion, not the document: the worker's memory "
                              "governor, the host's OOM killer, the worker's death or a lost lease; tried again on "
                              "another worker, and fatal with this class only when no attempt could finish"),
    Category.PROFILE: ("refused", "the worker cannot run the service's converter profile: an engine it does not have, "
                       "or a path missing or outside its profile roots"),
}  # fmt: skip

_TAXONOMY: dict[tuple[str, str], Meaning] = {
    (severity, category): Meaning(*entry)
    for severity, table in ((Severity.WARNING, _WARNING), (Severity.ERROR, _ERROR), (Severity.FATAL, _FATAL))
    for category, entry in table.items()
}
_BY_LOWER = {(severity, category.lower()): meaning for (severity, category), meaning in _TAXONOMY.items()}


def meaning_of(severity: str, category: str) -> Meaning | None:
    """The meaning of a category at a severity (its case as LaTeXML writes it, or any other); None for a
    category the taxonomy does not name, and for info messages, which it does not cover."""
    return _TAXONOMY.get((severity, category)) or _BY_LOWER.get((severity, category.lower()))
