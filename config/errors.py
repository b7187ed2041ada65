"""Errors a user can cause. Actions raise these; the API turns them into problem+json bodies and
the screens into messages, so both twins report the same words."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """An expected failure with an HTTP status, a short title and a human-readable detail."""

    status = 400
    title = "Bad request"
    slug = "bad-request"

    def __init__(self, detail: str, *, errors: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors


class BadRequest(ServiceError):
    pass


class Forbidden(ServiceError):
    status, title, slug = 403, "Forbidden", "forbidden"


class NotFound(ServiceError):
    status, title, slug = 404, "Not found", "not-found"


class Conflict(ServiceError):
    status, title, slug = 409, "Conflict", "conflict"


class Unprocessable(ServiceError):
    status, title, slug = 422, "Unprocessable request", "unprocessable"


class TooManyRequests(ServiceError):
    """The caller must wait `retry_after` seconds (answered with a Retry-After header)."""

    status, title, slug = 429, "Too many requests", "too-many-requests"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
