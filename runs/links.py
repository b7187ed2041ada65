"""The URLs of run screens (runs/urls.py, by route name), and of the report screens and API a run screen
or answer links to (reports/urls.py, by name: runs and reports import nothing of each other). Every name
is one escaped path segment (config.links.route)."""

from __future__ import annotations

from config.links import document_link, route

# A document's history screen: its status and classes in every snapshot.
document_history_url = document_link("runs-document-history")
# Its screen and its report in the API (reports/urls.py).
document_url = document_link("corpus-document")
document_api_url = document_link("api-document-report")


def run_url(corpus: str, service: str, run_id: int) -> str:
    """A run's row in the history of its pair's run page (the row's id is run-<id>)."""
    return f"{route('runs-pair', corpus=corpus, service=service)}#run-{run_id}"


def class_tasks_url(corpus: str, service: str, severity: str, category: str, what: str) -> str:
    """The screen of the documents that gained or lost a message class between two snapshots."""
    return route("runs-class-tasks", corpus=corpus, service=service, severity=severity, rest=[category, what])


def report_url(corpus: str, service: str) -> str:
    """The report overview of a pair (reports/urls.py)."""
    return route("corpus-report", corpus=corpus, service=service)
