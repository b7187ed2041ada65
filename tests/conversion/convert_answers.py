"""What two `/convert` answers to the same request must share, whichever engine gave them: the form in
which tests/fixtures/convert keeps the cold latexmlc's answers, and in which a test compares another run
(the cold one again, or a warm engine) with them."""

from __future__ import annotations

import re
from itertools import groupby

from conversion.logparse import parse_log

# An id is the name of a node, not its content: an engine that numbers its documents or nodes from another
# counter gives other ids to the same answer.
_ID_ATTRIBUTE = re.compile(r'(?<![\w:-])(xml:id|id|fragid)="[^"]*"')
ID_PLACEHOLDER = "ID"
# Perl's addresses of objects ("Core::Gullet[@0x55d...]", "HASH(0x55d...", "XMLDocument[94763467376560]")
# in the details of an error: where the process's allocator put them, different in each run.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_REFADDR = re.compile(r"(?<=XMLDocument\[)[0-9]+(?=\])")
ADDRESS_PLACEHOLDER = "ADDR"
# LaTeXML's post-processing lists the keys it missed in the order of a Perl hash, which differs in each run:
# "Missing Entry for citation: b,a" (and a bare list of ids on a line of its own), in messages about ids
# (Warning:expected:ids, Warning:unexpected:ids).
_IDS = "ids"
_KEY_LIST = re.compile(r"^((?:Missing [^:\n]*: )?)([^\s,]+(?:,[^\s,]+)+)$", re.MULTILINE)
# parse_log's message for each file a progress line says was loaded.
_LOADED_FILE = "loaded_file"


def normalised(answer: dict) -> dict:
    """The parts of a /convert answer ({result, log, status, status_code}) that do not depend on the run,
    as {result, status, status_code, messages}, in plain JSON types.

    - result: trimmed, with the values of `id`, `xml:id` and `fragid` attributes replaced by ID_PLACEHOLDER.
    - status and status_code: as they are.
    - messages: the log's messages as conversion.logparse.parse_log reads them (the Info, Warning, Error and
      Fatal lines LaTeXML writes as `Severity:category:object details`, with their TAB continuation lines),
      each as [severity, category, what, details], with the same id placeholder, Perl's object addresses
      (which differ in every run) replaced by ADDRESS_PLACEHOLDER, and the lists of missing keys that
      LaTeXML writes in hash order (messages about ids: "Missing Entry for citation: b,a") sorted. They are
      in log order, except that adjacent messages of the same severity, category and object are sorted among
      themselves: LaTeXML writes some of those in Perl's hash order too (the `Warning:uninitialized:value`
      pairs of the lines 5995 and 5998 of TeX.pool that evaluating the properties of \\sum can give).

    Left out, as it is timing or belongs to the run rather than to the answer: the engine's measures
    (runtime_ms, cpu_ms, peak_rss_kb, which parse_log keeps apart from the messages), the progress lines with
    their durations ("(Digesting TeX input... 0.27 sec)"), the "processing started/finished" dates, the
    "invoked as" line and the status line (its code is status_code). Left out too are the loaded_file
    messages parse_log makes of the "(Loading ...)" progress lines: which files a run loads, and when, says
    how the engine started, not what it answered. A warm engine loads the pools and bindings once, before
    any request, so its log of a request names them at another place or not at all; a file that a request
    needs and does not get shows in the result and in the error messages, which are compared."""
    messages = [
        [message.severity, message.category, _without_run(message.what), _details(message.what, message.details)]
        for message in parse_log(answer["log"]).messages
        if message.category != _LOADED_FILE
    ]
    messages = [message for _, run in groupby(messages, key=lambda message: message[:3]) for message in sorted(run)]
    return {
        "result": _without_ids(answer["result"].strip()),
        "status": answer["status"],
        "status_code": answer["status_code"],
        "messages": messages,
    }


def _without_ids(text: str) -> str:
    return _ID_ATTRIBUTE.sub(rf'\1="{ID_PLACEHOLDER}"', text)


def _details(what: str, details: str) -> str:
    details = _without_run(details)
    if what == _IDS:
        details = _KEY_LIST.sub(lambda match: match.group(1) + ",".join(sorted(match.group(2).split(","))), details)
    return details


def _without_run(text: str) -> str:
    text = _ADDRESS.sub(ADDRESS_PLACEHOLDER, text)
    return _without_ids(_REFADDR.sub(ADDRESS_PLACEHOLDER, text))
