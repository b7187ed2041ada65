"""A resource's read, declared once for its API endpoint and its screen, as NetBox's generic views share
one queryset, filter set and table per model: the query parameters it takes (an input serializer), what
it computes from them and the URL's arguments, and the serializer that answers.

The API view of a read is `ReadApi` with the read named (its GET and its OpenAPI operation follow); its
screen takes `Read.screen_data`, the same answer, and renders it. The two differ only where the screens
and the API always differ: a screen's empty form field means "not narrowed" (config.screens.given), and
its refusal is a BadRequest for the error page where the API's is DRF's ValidationError."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from django.http import QueryDict
from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer, Serializer
from rest_framework.views import APIView

from config.api.schema import problems
from config.screens import given, validated

# What a read computes its value from: the checked query parameters and the URL's arguments.
Fetch = Callable[..., Any]


@dataclass(frozen=True)
class Read:
    """One read at the API's `route` (the URL pattern `name`): `fetch(query, **url_kwargs)` with the query
    `params` checked, answered by `answer` (a list of them when `many`); its OpenAPI operation says
    `problems` besides the 200."""

    route: str
    name: str
    operation_id: str
    summary: str
    tag: str
    answer: type[BaseSerializer[Any]]
    fetch: Fetch
    params: type[Serializer[Any]] | None = None
    many: bool = False
    problems: tuple[int, ...] = (404,)
    description: str | None = None

    def query(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The API's query parameters, checked: a refusal is DRF's ValidationError (a 400 problem)."""
        if self.params is None:
            return {}
        checked = self.params(data=data)
        checked.is_valid(raise_exception=True)
        return dict(checked.validated_data)

    def screen_query(self, data: QueryDict) -> dict[str, Any]:
        """A screen's query parameters, checked without its empty fields: a refusal is a BadRequest."""
        return {} if self.params is None else dict(validated(self.params(data=given(data))))

    def render(self, value: Any) -> Any:
        """The answer of a fetched value: what the API sends and the screen shows."""
        return self.answer(value, many=self.many).data

    def api_data(self, data: Mapping[str, Any], **kwargs: str) -> Any:
        return self.render(self.fetch(self.query(data), **kwargs))

    def screen_data(self, data: QueryDict, **kwargs: str) -> Any:
        return self.render(self.fetch(self.screen_query(data), **kwargs))

    def schema(self) -> Any:
        """The OpenAPI operation of the read's GET."""
        return extend_schema(
            operation_id=self.operation_id,
            summary=self.summary,
            description=self.description,
            parameters=[self.params] if self.params is not None else None,
            responses={200: self.answer(many=True) if self.many else self.answer, **problems(*self.problems)},
            tags=[self.tag],
        )


# The API view of a `read`: its GET answers `read.api_data`, documented by `read.schema()`. Mix it in before the
# view's access class (public or token-gated), naming the read:
# `class TelemetryApi(ReadApi, PublicApiView): read = reads.telemetry`. It has no docstring: the OpenAPI
# document describes an operation by the first docstring of its view's classes, the access class's.
class ReadApi(APIView):
    read: ClassVar[Read]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "read" in cls.__dict__:
            extend_schema_view(get=cls.read.schema())(cls)

    def get(self, request: Request, **kwargs: str) -> Response:
        return Response(self.read.api_data(request.query_params, **kwargs))


def read_paths(module: ModuleType, access: type[APIView]) -> list[URLPattern]:
    """The API's URL patterns of every Read a module declares, in the order it declares them: each the
    ReadApi of its read behind `access` (public, or token-gated), named after its operation."""
    patterns = []
    for read in vars(module).values():
        if isinstance(read, Read):
            view: type[APIView] = type(
                f"ReadApi_{read.operation_id}", (ReadApi, access), {"read": read, "__module__": module.__name__}
            )
            patterns.append(path(read.route, view.as_view(), name=read.name))
    return patterns
