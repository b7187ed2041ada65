"""The HTTP side of ccs: one httpx client that sends the service token in the X-Service-Token header
(accounts/auth.py reads it there, or from a `token` query parameter, which ccs never uses: a URL
ends up in logs), and turns every failure into an error of one line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from cli.settings import Settings

TOKEN_HEADER = "X-Service-Token"
TIMEOUT = httpx.Timeout(120.0, connect=10.0)


class CliError(Exception):
    """A failure ccs reports in words and exit code 1, never as a traceback."""


class ApiError(CliError):
    """The server answered with an error: its problem+json title and detail (docs/decisions/errors.md)."""

    def __init__(self, status: int, title: str, detail: str, errors: Any = None) -> None:
        self.status, self.title, self.detail, self.errors = status, title, detail, errors
        super().__init__(f"{title} ({status}): {detail}")

    @classmethod
    def of(cls, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and "title" in body:
            return cls(response.status_code, str(body["title"]), str(body.get("detail", "")), body.get("errors"))
        text = response.text.strip().splitlines()[0][:200] if response.text.strip() else response.reason_phrase
        return cls(response.status_code, response.reason_phrase or "Error", text)


class Client:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        headers = {"Accept": "application/json", "User-Agent": "ccs"}
        if settings.token:
            headers[TOKEN_HEADER] = settings.token
        self._http = httpx.Client(base_url=settings.url, headers=headers, timeout=TIMEOUT, follow_redirects=False)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        form: dict[str, Any] | None = None,
        ok: bool = False,
    ) -> httpx.Response:
        """The response to `method path` with a JSON `body` or a `form`; an error status raises ApiError
        unless `ok` (the caller looks)."""
        query = {key: value for key, value in (params or {}).items() if value is not None}
        try:
            response = self._http.request(method, path, params=query, json=body, data=form)
        except httpx.TimeoutException as exc:
            raise CliError(
                f"{self.settings.url} did not answer {method} {path} in time ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.settings.url_words}: {exc}") from exc
        if response.status_code >= 400 and not ok:
            raise ApiError.of(response)
        return response

    def stream(self, path: str, *, params: dict[str, Any] | None = None) -> Iterator[bytes]:
        """The body of GET `path` as it arrives (a download); an error status raises ApiError first."""
        query = {key: value for key, value in (params or {}).items() if value is not None}
        try:
            with self._http.stream("GET", path, params=query) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.of(response)
                yield from response.iter_bytes()
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.settings.url_words}: {exc}") from exc

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.send(method, path, **kwargs)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise CliError(f"{method} {path} answered {response.status_code} without JSON") from exc
