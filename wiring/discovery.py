"""GET /api, the OpenAPI document and the interactive reference, all built from one schema."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import PublicApiView
from config.api.errors import PROBLEM_CONTENT_TYPE

_METHODS = ("get", "post", "put", "patch", "delete")


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    """The whole OpenAPI document; it only changes with the code, so it is built once a process."""
    document: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return document


def endpoint_index() -> list[dict[str, Any]]:
    """Every operation of the document: method, path, whether it is public, one-line summary."""
    rows = []
    for path, item in openapi_document()["paths"].items():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            rows.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "public": not operation.get("security"),
                    "summary": operation.get("summary", ""),
                }
            )
    return rows


class EndpointSerializer(serializers.Serializer[object]):
    method = serializers.CharField()
    path = serializers.CharField()
    public = serializers.BooleanField()
    summary = serializers.CharField()


class DiscoverySerializer(serializers.Serializer[object]):
    name = serializers.CharField()
    version = serializers.CharField()
    openapi = serializers.CharField()
    docs = serializers.CharField()
    endpoints = EndpointSerializer(many=True)


class DiscoveryApi(PublicApiView):
    @extend_schema(
        operation_id="api_index",
        summary="Discovery index of the agent API: every endpoint with method, path, public or not, summary",
        responses={200: DiscoverySerializer},
        tags=["management"],
    )
    def get(self, request: Request) -> Response:
        info = openapi_document()["info"]
        body = {
            "name": info["title"],
            "version": info["version"],
            "openapi": "/api/openapi.json",
            "docs": "/api/docs",
            "endpoints": endpoint_index(),
        }
        return Response(DiscoverySerializer(body).data)


class OpenApiJsonView(SpectacularJSONAPIView):
    authentication_classes: Sequence[type[BaseAuthentication]] = []

    @extend_schema(
        operation_id="openapi_document",
        summary="This API described in OpenAPI 3.0 JSON",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="OpenAPI 3.0 document")},
        tags=["management"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(openapi_document(), headers={"Content-Disposition": "inline"})


class ApiDocsView(SpectacularSwaggerView):
    authentication_classes: Sequence[type[BaseAuthentication]] = []
    http_method_names = ["get", "head"]
    url_name = "api-openapi"

    @extend_schema(
        operation_id="api_docs",
        summary="Interactive HTML reference of this API (works offline)",
        responses={(200, "text/html"): OpenApiResponse(OpenApiTypes.STR, description="HTML page")},
        tags=["management"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # drf-spectacular's view method carries no annotations; it renders the page as a Response.
        page: Callable[..., Response] = super().get
        return page(request, *args, **kwargs)

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        # The page renders through an HTML template; its errors are problem bodies like every other.
        if response.status_code >= 400:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = PROBLEM_CONTENT_TYPE
        return super().finalize_response(request, response, *args, **kwargs)
