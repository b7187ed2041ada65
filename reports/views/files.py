"""A converted document to read: the reader screen, and the files it frames (the paper's HTML, images and
CSS, members of the stored result ZIP, served under reports.serializers.PAPER_POLICY: they show and cannot
act), and the result ZIP itself.

Where there is no such file, these routes answer with a plain message and the status: they are opened in
frames and new tabs, where the application's own page would stand in the paper's place."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from config.errors import NotFound, ServiceError
from corpora.queries.corpora import pair_resolve
from corpora.queries.reports import document_paper, document_report, document_result_archive
from corpora.results import result_member
from reports.links import document_file_url, document_url
from reports.serializers import DocumentReportSerializer, paper_file_response


def plain_refusal(exc: ServiceError) -> HttpResponse:
    """The refusal's words as plain text with its status: no page of the application around it."""
    response = HttpResponse(f"{exc.detail}\n", status=exc.status, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
def document_reader_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse:
    """The converted paper as a reader sees it, its HTML whole in a sandboxed frame under the document's name
    and links. The context DTO is that of GET /api/corpus/<c>/<s>/document/<name>; the paper in the frame is
    that of GET /api/corpus/<c>/<s>/document/<name>/html. No HTML: 404, in words."""
    try:
        document = DocumentReportSerializer(document_report(pair_resolve(corpus, service), name, contexts=False)).data
        if not document["has_html"]:
            raise NotFound(f"No HTML: {name!r} has no converted paper for {service} in {corpus}.")
    except ServiceError as exc:
        return plain_refusal(exc)
    document_href = document_url(document["corpus"], document["service"], document["document"])
    return render(request, "reports/reader.html", {"document": document, "document_href": document_href})


@require_GET
def document_result_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse | FileResponse:
    """The stored result archive of a document, as a download."""
    try:
        archive = document_result_archive(pair_resolve(corpus, service), name)
    except ServiceError as exc:
        return plain_refusal(exc)
    return FileResponse(archive.open("rb"), as_attachment=True, filename=f"{name}.zip", content_type="application/zip")


@require_GET
def document_html_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse:
    """The converted HTML: a redirect to the archive's first .html/.xhtml member under files/, so the
    member's relative references (images, CSS) resolve to the other members."""
    try:
        _archive, member = document_paper(pair_resolve(corpus, service), name)
    except ServiceError as exc:
        return plain_refusal(exc)
    return redirect(document_file_url(corpus, service, name, member))


@require_GET
def document_file_view(
    request: HttpRequest, corpus: str, service: str, name: str, member: str
) -> HttpResponse | StreamingHttpResponse:
    """One member of the result archive, under the paper policy."""
    try:
        chunks = result_member(document_result_archive(pair_resolve(corpus, service), name), member)
    except ServiceError as exc:
        return plain_refusal(exc)
    return paper_file_response(chunks, member)
