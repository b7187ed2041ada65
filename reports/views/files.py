"""The files of a converted document: the stored result ZIP, and its members (the HTML preview and
its images and CSS) served under a policy that lets them show but not act."""

from __future__ import annotations

import mimetypes

from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET

from config.errors import ServiceError
from config.screens import error_page
from corpora.links import document_file_url
from corpora.results import result_member, result_preview
from reports.queries import document_result_archive

PREVIEW_CSP = (
    "default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; "
    "frame-ancestors 'self'; sandbox"
)


@require_GET
def document_result_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse:
    """The stored result archive of a document, as a download."""
    try:
        archive = document_result_archive(corpus, service, name)
    except ServiceError as exc:
        return error_page(request, exc)
    return FileResponse(archive.open("rb"), as_attachment=True, filename=f"{name}.zip", content_type="application/zip")


@require_GET
def document_html_view(request: HttpRequest, corpus: str, service: str, name: str) -> HttpResponse:
    """The converted HTML: a redirect to the archive's first .html/.xhtml member under files/, so the
    member's relative references (images, CSS) resolve to the other members."""
    try:
        member = result_preview(document_result_archive(corpus, service, name))
    except ServiceError as exc:
        return error_page(request, exc)
    return redirect(document_file_url(corpus, service, name, member))


@xframe_options_sameorigin
@require_GET
def document_file_view(request: HttpRequest, corpus: str, service: str, name: str, member: str) -> HttpResponse:
    """One member of the result archive, under a policy that lets it show but not act."""
    try:
        chunks = result_member(document_result_archive(corpus, service, name), member)
    except ServiceError as exc:
        return error_page(request, exc)
    content_type = mimetypes.guess_type(member)[0] or "application/octet-stream"
    if content_type == "text/html":
        content_type += "; charset=utf-8"  # LaTeXML writes UTF-8
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Security-Policy"] = PREVIEW_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response
