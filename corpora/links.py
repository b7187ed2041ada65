"""The URLs that corpora's own screens and API answers link to: its own (corpora/urls.py) and the report
screens and API of a pair's documents (reports/urls.py), by route name, each document name one escaped path
segment (config.links.route). corpora's domain modules import none of this: they return names and keys
(tests/test_architecture.py)."""

from __future__ import annotations

from django.urls import reverse

from config.links import document_link, route

# A document's screen and reader screen, its report and its converted HTML in the API (reports/urls.py).
document_url = document_link("corpus-document")
document_reader_url = document_link("corpus-document-reader")
document_api_url = document_link("api-document-report")
document_html_api_url = document_link("api-document-html")


def document_list_url(corpus: str, service: str) -> str:
    """The screen of a pair's documents."""
    return route("corpus-documents", corpus=corpus, service=service)


def experiment_api_url(name: str) -> str:
    """An experiment in the API."""
    return reverse("api-experiment", kwargs={"name": name})


def export_file_api_url(out: str, name: str) -> str:
    """A file of a finished export (an archive or its manifest) in the API."""
    return reverse("api-export-file", kwargs={"out": out, "name": name})


def report_url(corpus: str, service: str, *levels: str) -> str:
    """The report screen of a pair, or of a level of it: a severity, then its category and what."""
    if not levels:
        return route("corpus-report", corpus=corpus, service=service)
    severity, *rest = levels
    if not rest:
        return route("corpus-report-severity", corpus=corpus, service=service, severity=severity)
    return route("corpus-report-drill", corpus=corpus, service=service, severity=severity, rest=rest)
