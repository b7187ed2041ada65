"""OpenAPI plumbing: error responses documented as problem+json with one shared schema."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse

PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details; `errors` lists field problems.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "request_id": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": True},
    },
    "required": ["type", "title", "status", "detail"],
}

_DESCRIPTIONS = {
    400: "Bad request (see detail and errors)",
    401: "Missing or invalid service token",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "The request body is larger than the server accepts",
    422: "Unprocessable request",
    429: "Too many failed authentications from this address; wait Retry-After seconds",
    503: "Service unavailable (database or connection pool)",
}


def problems(*codes: int) -> dict[int, OpenApiResponse]:
    """Response entries for extend_schema(responses=...) for the given error codes."""
    return {code: OpenApiResponse(description=_DESCRIPTIONS.get(code, "Error")) for code in codes}


def problem_responses_hook(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Give every 4xx/5xx response the Problem schema under application/problem+json, add 401 and 429 to
    gated operations, and 400 (a NUL in the request, a Host not allowed), 413 (a body over the limit) and
    503 (a database outage) to all, since the request guard and the database stand before every one."""
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    ref = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            security = operation.get("security", [])
            if security and {} not in security:
                responses.setdefault("401", {"description": _DESCRIPTIONS[401]})
                responses.setdefault("429", {"description": _DESCRIPTIONS[429]})
            else:  # a public endpoint: spectacular's anonymous [{}] only adds noise
                operation.pop("security", None)
            for code in (400, 413, 503):
                responses.setdefault(str(code), {"description": _DESCRIPTIONS[code]})
            for code, response in responses.items():
                if int(code) >= 400 and "content" not in response:
                    response["content"] = ref
                    response.setdefault("description", _DESCRIPTIONS.get(int(code), "Error"))
    return result
