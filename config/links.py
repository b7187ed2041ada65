"""How an app builds the URL of a named route: each name escaped as one whole path segment; and the
serializer field of a URL that the presenting app builds from the keys an answer carries.

The builders themselves live with the screens: reports/links.py (report screens and a document's
result files), runs/links.py (run screens), corpora/links.py (what corpora's own screens and API link
to). The domain returns names and keys (corpus, service, document, ...) and names no screen.

Names are escaped as whole path segments, '/' included: a category or what holding '/', '..' or '//'
(file paths are whats) would otherwise be rewritten by browsers and proxies, and the server decodes %2F
before routing anyway, so corpora.queries.reports.report_path_split decides where a category ends. reverse()
itself leaves '/' of a path part as it is and refuses it in a str part, so the route is reversed with
markers that the escaped parts replace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from django.urls import reverse
from rest_framework import serializers

_MARKER = re.compile(r"__(\w+?)__")


def segment(name: str) -> str:
    """One URL path segment of a name: every reserved character escaped, '/' included."""
    return quote(name, safe="")


def route(route_name: str, /, **parts: str | list[str]) -> str:
    """The path of the route `route_name`, each part one escaped segment (a list: several, joined by '/')."""
    marked = reverse(route_name, kwargs={key: f"__{key}__" for key in parts})

    def escaped(match: re.Match[str]) -> str:
        value = parts[match[1]]
        return "/".join(segment(item) for item in value) if isinstance(value, list) else segment(value)

    # One pass, so a name that itself looks like a marker is never replaced again.
    return _MARKER.sub(escaped, marked)


def document_link(route_name: str) -> Callable[[str, str, str], str]:
    """The URL builder of a route whose path holds a document's corpus, service and name."""

    def url(corpus: str, service: str, name: str) -> str:
        return route(route_name, corpus=corpus, service=service, name=name)

    return url


class LinkField(serializers.CharField):
    """A URL of an answer, built by `link(answer)` from the keys it carries (None: null). In the OpenAPI
    document it is the CharField it extends, with the same help text and nullability."""

    def __init__(self, link: Callable[[Any], str | None], **kwargs: Any) -> None:
        self.link = link
        super().__init__(**kwargs)

    def get_attribute(self, instance: Any) -> str | None:
        return self.link(instance)
