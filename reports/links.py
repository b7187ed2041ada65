"""The URLs of report screens and of a document's result files (reports/urls.py, by route name), and of
the runs screen a report links to (runs/urls.py, by name: runs and reports import nothing of each other).
Every name is one escaped path segment (config.links.route)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from config.links import document_link, route

# A document's screen, the download of its stored result archive, its converted HTML (a redirect to its
# first HTML member) and its reader screen (its converted paper, whole, in a sandboxed frame).
document_url = document_link("corpus-document")
document_result_url = document_link("corpus-document-result")
document_html_url = document_link("corpus-document-html")
document_reader_url = document_link("corpus-document-reader")
# Its history screen (runs/urls.py): its status and classes in every snapshot.
document_history_url = document_link("runs-document-history")


def report_url(
    corpus: str, service: str, severity: str | None = None, category: str | None = None, what: str | None = None
) -> str:
    """The screen of a report level: overview, severity, what report of a category, or entry list."""
    if severity is None:
        return route("corpus-report", corpus=corpus, service=service)
    if category is None:
        return route("corpus-report-severity", corpus=corpus, service=service, severity=severity)
    rest = [category] if what is None else [category, what]
    return route("corpus-report-drill", corpus=corpus, service=service, severity=severity, rest=rest)


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
    return f"{route('api-report-messages', corpus=corpus, service=service)}?{query}"


def document_file_url(corpus: str, service: str, name: str, member: str) -> str:
    """One member of a document's result archive; the member's own '/' stay path separators."""
    return route("corpus-document-file", corpus=corpus, service=service, name=name, member=member.split("/"))


def document_file_api_url(corpus: str, service: str, name: str, member: str) -> str:
    """One member of a document's result archive in the API."""
    return route("api-document-file", corpus=corpus, service=service, name=name, member=member.split("/"))


def run_url(corpus: str, service: str, run_id: int) -> str:
    """A run's row in the history of its pair's run page (runs/urls.py; the row's id is run-<id>)."""
    return f"{route('runs-pair', corpus=corpus, service=service)}#run-{run_id}"


def is_report_url(path: str) -> bool:
    """Whether a local path (a form's `next`) lies under the report screens."""
    prefix = reverse("corpus-report", kwargs={"corpus": "__corpus__", "service": "__service__"}).split("__corpus__")[0]
    return path.startswith(prefix)
