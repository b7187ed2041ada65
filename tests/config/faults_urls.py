"""Routes that exist only in tests, to drive the error handling through a crash and a write."""

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.actions import journaled
from accounts.api_base import PublicApiView, TokenApiView
from config.errors import Conflict
from wiring.urls import urlpatterns as real_urlpatterns


class Crash(PublicApiView):
    def get(self, request: Request) -> Response:
        raise RuntimeError("password=hunter2 in a traceback")


@journaled("test.failing_write", target="{name}")
def failing_write(*, name: str, actor: str) -> None:
    raise Conflict(f"{name} exists already")


class FailingWrite(TokenApiView):
    def post(self, request: Request, name: str) -> Response:
        failing_write(name=name, actor=self.actor_name())


class Echo(TokenApiView):
    def post(self, request: Request) -> Response:
        return Response(request.data)


urlpatterns = [
    path("api/_test/echo", Echo.as_view()),
    path("api/_test/crash", Crash.as_view()),
    path("api/_test/write/<str:name>", FailingWrite.as_view()),
    *real_urlpatterns,
]
