"""The URLs of report screens and of a document's result files: the one place that builds them.

Routes come from reports/urls.py by name (reverse). Names are escaped as whole path segments, '/'
included: a category or what holding '/', '..' or '//' (file paths are whats) would otherwise be
rewritten by browsers and proxies, and the server decodes %2F before routing anyway, so
report_path_split decides where a category ends. reverse() itself leaves '/' of a path part as it is
and refuses it in a str part, so the route is reversed with markers that the escaped parts replace.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

from django.urls import reverse

_MARKER = re.compile(r"__(\w+?)__")


def segment(name: str) -> str:
    """One URL path segment of a name: every reserved character escaped, '/' included."""
    return quote(name, safe="")


def _route(route: str, **parts: str | list[str]) -> str:
    """The path of a named route, each part one escaped segment (a list: several, joined by '/')."""
    marked = reverse(route, kwargs={key: f"__{key}__" for key in parts})

    def escaped(match: re.Match[str]) -> str:
        value = parts[match[1]]
        return "/".join(segment(item) for item in value) if isinstance(value, list) else segment(value)

    # One pass, so a name that itself looks like a marker is never replaced again.
    return _MARKER.sub(escaped, marked)


def report_url(
    corpus: str, service: str, severity: str | None = None, category: str | None = None, what: str | None = None
) -> str:
    """The screen of a report level: overview, severity, what report of a category, or entry list."""
    if severity is None:
        return _route("corpus-report", corpus=corpus, service=service)
    if category is None:
        return _route("corpus-report-severity", corpus=corpus, service=service, severity=severity)
    rest = [category] if what is None else [category, what]
    return _route("corpus-report-drill", corpus=corpus, service=service, severity=severity, rest=rest)


def messages_export_url(
    corpus: str,
    service: str,
    severity: str | None = None,
    category: str | None = None,
    what: str | None = None,
    *,
    format_name: str,
) -> str:
    """The download of every message of a report level (GET /api/reports/<c>/<s>/messages) in a format."""
    scope = {"severity": severity, "category": category, "what": what}
    query = urlencode({**{key: value for key, value in scope.items() if value is not None}, "format": format_name})
    return f"{_route('api-report-messages', corpus=corpus, service=service)}?{query}"


def document_url(corpus: str, service: str, name: str) -> str:
    """The document screen of a (corpus, service, document)."""
    return _route("corpus-document", corpus=corpus, service=service, name=name)


def document_api_url(corpus: str, service: str, name: str) -> str:
    """The document report of a (corpus, service, document) in the API."""
    return _route("api-document-report", corpus=corpus, service=service, name=name)


def document_history_url(corpus: str, service: str, name: str) -> str:
    """The history screen of a (corpus, service, document): its status and classes in every snapshot."""
    return _route("runs-document-history", corpus=corpus, service=service, name=name)


def document_history_api_url(corpus: str, service: str, name: str) -> str:
    """The history of a (corpus, service, document) in the API."""
    return _route("api-document-history", corpus=corpus, service=service, name=name)


def run_url(corpus: str, service: str, run_id: int) -> str:
    """A run's row in the history of its pair's run page (the row's id is run-<id>)."""
    return f"{_route('runs-pair', corpus=corpus, service=service)}#run-{run_id}"


def class_tasks_url(corpus: str, service: str, severity: str, category: str, what: str) -> str:
    """The screen of the documents that gained or lost a message class between two snapshots."""
    return _route("runs-class-tasks", corpus=corpus, service=service, severity=severity, rest=[category, what])


def document_result_url(corpus: str, service: str, name: str) -> str:
    """The download of a document's stored result archive."""
    return _route("corpus-document-result", corpus=corpus, service=service, name=name)


def document_html_url(corpus: str, service: str, name: str) -> str:
    """The converted HTML of a document (a redirect to its first HTML member)."""
    return _route("corpus-document-html", corpus=corpus, service=service, name=name)


def document_file_url(corpus: str, service: str, name: str, member: str) -> str:
    """One member of a document's result archive; the member's own '/' stay path separators."""
    return _route("corpus-document-file", corpus=corpus, service=service, name=name, member=member.split("/"))


def document_reader_url(corpus: str, service: str, name: str) -> str:
    """The reader screen of a document: its converted paper, whole, in a sandboxed frame."""
    return _route("corpus-document-reader", corpus=corpus, service=service, name=name)


def document_html_api_url(corpus: str, service: str, name: str) -> str:
    """The converted HTML of a document in the API (a redirect to its member)."""
    return _route("api-document-html", corpus=corpus, service=service, name=name)


def document_file_api_url(corpus: str, service: str, name: str, member: str) -> str:
    """One member of a document's result archive in the API."""
    return _route("api-document-file", corpus=corpus, service=service, name=name, member=member.split("/"))


def document_list_url(corpus: str, service: str) -> str:
    """The screen of a pair's documents."""
    return _route("corpus-documents", corpus=corpus, service=service)


def is_report_url(path: str) -> bool:
    """Whether a local path (a form's `next`) lies under the report screens."""
    prefix = reverse("corpus-report", kwargs={"corpus": "__corpus__", "service": "__service__"}).split("__corpus__")[0]
    return path.startswith(prefix)
