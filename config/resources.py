"""A resource's read, declared once for its API endpoint and its screen, as NetBox's generic views share
one queryset, filter set and table per model: the query parameters it takes (an input serializer), what
it computes from them and the URL's arguments, and the serializer that answers. A resource's action (a
write, or a read of the caller's own) is declared the same way for its API endpoint: what it does for the
view's caller, and the status and serializer that answer.

`resource_paths` gives the declarations of a module their API views (`ResourceApi`: one per route, each
operation a method with its OpenAPI operation) and URL patterns; a read's screen takes
`Read.screen_data`, the same answer, and renders it. The two differ only where the screens
and the API always differ: a screen's empty form field means "not narrowed" (config.screens.given), and
its refusal is a BadRequest for the error page where the API's is DRF's ValidationError."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from django.http import QueryDict
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema
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
    parameters: tuple[Any, ...] = ()  # OpenAPI parameters besides `params`' (a path parameter described)
    access: type[APIView] | None = None  # the view's access class, where not the module's

    method: ClassVar[str] = "get"

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
            parameters=[*([self.params] if self.params is not None else []), *self.parameters] or None,
            responses={200: self.answer(many=True) if self.many else self.answer, **problems(*self.problems)},
            tags=[self.tag],
        )

    def respond(self, view: APIView, request: Request, **kwargs: str) -> HttpResponseBase:
        return Response(self.api_data(request.query_params, **kwargs))


@dataclass(frozen=True)
class Action:
    """One operation `method` at the API's `route` (the URL pattern `name`) done for the view's caller:
    `act(view, request, **url_kwargs)` (a write journals itself), answered with `status` and the `answer`
    of its value (no body when None) and the `headers` it gives; an act may answer itself (a file). Its
    OpenAPI operation takes the `request` body and the `parameters`, and says `problems` besides."""

    route: str
    name: str
    method: str
    operation_id: str
    summary: str
    tag: str
    act: Fetch
    answer: type[BaseSerializer[Any]] | None = None
    many: bool = False
    status: int = 200
    request: Any = None
    parameters: tuple[Any, ...] = ()
    problems: tuple[int, ...] = ()
    headers: Callable[[Any], dict[str, str]] | None = None
    responses: Mapping[Any, Any] | None = None  # the OpenAPI answers, where not `status` with `answer`
    description: str | None = None
    access: type[APIView] | None = None

    def schema(self) -> Any:
        answer = self.answer(many=True) if self.answer is not None and self.many else self.answer
        return extend_schema(
            operation_id=self.operation_id,
            summary=self.summary,
            description=self.description,
            request=self.request,
            parameters=list(self.parameters) or None,
            responses=dict(self.responses or {self.status: answer, **problems(*self.problems)}),
            tags=[self.tag],
        )

    def respond(self, view: APIView, request: Request, **kwargs: str) -> HttpResponseBase:
        value = self.act(view, request, **kwargs)
        if isinstance(value, HttpResponseBase):
            return value
        body = None if self.answer is None else self.answer(value, many=self.many).data
        return Response(body, status=self.status, headers=self.headers(value) if self.headers else None)


# The API view of one route: a method per declared operation (`operations`, by method), each answering
# by its declaration and documented by its `schema()`. It has no docstring, nor have its methods: the
# OpenAPI document describes an operation by the first docstring of its view's classes, the access
# class's (public, token-gated, or public reads and gated writes) that `resource_paths` mixes in after it.
class ResourceApi(APIView):
    operations: ClassVar[dict[str, Read | Action]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for method, operation in cls.__dict__.get("operations", {}).items():
            setattr(cls, method, operation.schema()(_handler(operation)))


def _handler(operation: Read | Action) -> Callable[..., HttpResponseBase]:
    def handle(self: APIView, request: Request, **kwargs: str) -> HttpResponseBase:
        return operation.respond(self, request, **kwargs)

    return handle


def resource_paths(module: ModuleType, access: type[APIView]) -> list[URLPattern]:
    """The API's URL patterns of every Read and Action a module declares, a route's in one view, in the
    order it declares them: each the ResourceApi of its operations behind its access class (the first
    a declaration names, else `access`), named after its first operation."""
    routes: dict[str, list[Read | Action]] = {}
    for declared in vars(module).values():
        if isinstance(declared, (Read, Action)):
            routes.setdefault(declared.route, []).append(declared)
    patterns = []
    for route, operations in routes.items():
        first = operations[0]
        gate = next((op.access for op in operations if op.access is not None), access)
        attrs = {"operations": {op.method: op for op in operations}, "__module__": module.__name__}
        view: type[APIView] = type(f"Api_{first.operation_id}", (ResourceApi, gate), attrs)
        patterns.append(path(route, view.as_view(), name=first.name))
    return patterns
