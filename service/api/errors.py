"""RFC 9457 problem+json for every error, installed in one place."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from sustain.probes.load.profiles import PROFILE_KINDS
from sustain.service.alerting.notifiers import REGISTRY as NOTIFIER_KINDS
from sustain.service.errors import (
    FieldError,
    ServiceError,
    TooManyRequestsError,
    UnauthenticatedError,
)
from sustain.service.strict_json import StrictJSONResponse

logger = logging.getLogger(__name__)

PROBLEM_TYPE = "application/problem+json"
POOL_RETRY_AFTER_S = 5
"""Retry-After (seconds) of a 503 for a request that found every API database connection
busy."""
DATA_EXCEPTION_CLASS = "22"


def problem(request: Request, status: int, title: str, detail: str,
            **extra: Any) -> StrictJSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail,
            "instance": request.url.path, **extra}
    return StrictJSONResponse(body, status_code=status, media_type=PROBLEM_TYPE)


def _field(loc: tuple[int | str, ...]) -> str:
    """`("body", "profile", "constant", "rate")` -> `profile.rate`: the path a user wrote.

    Body fields drop the "body" prefix and discriminated-union tags (load profile and
    notifier kinds); query and path parameters keep their location, e.g. `query.limit`.
    """
    parts = [str(p) for p in loc]
    if parts[:1] == ["body"]:
        parts = parts[1:]
    return ".".join(p for p in parts
                    if p not in PROFILE_KINDS and p not in NOTIFIER_KINDS) or "body"


def validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    errors = []
    for error in exc.errors():
        field = _field(tuple(error.get("loc", ())))
        ctx_field = (error.get("ctx") or {}).get("field")
        if ctx_field:
            field = f"{field}.{ctx_field}" if field != "body" else str(ctx_field)
        errors.append({"field": field, "message": str(error.get("msg", "invalid"))})
    return errors


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> StrictJSONResponse:
        errors = validation_errors(exc)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem(request, 422, "Invalid request", detail, errors=errors)

    @app.exception_handler(FieldError)
    async def _field_error(request: Request, exc: FieldError) -> StrictJSONResponse:
        return problem(request, 422, exc.title, str(exc),
                       errors=[{"field": f, "message": m} for f, m in exc.problems])

    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> StrictJSONResponse:
        response = problem(request, exc.status, exc.title, str(exc))
        if isinstance(exc, UnauthenticatedError):
            response.headers["WWW-Authenticate"] = 'Bearer realm="sustain"'
        if isinstance(exc, TooManyRequestsError):
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(PoolTimeoutError)
    async def _pool_busy(request: Request, exc: PoolTimeoutError) -> StrictJSONResponse:
        # every connection of the API's own pool is taken (SUSTAIN_DATABASE_API_POOL_SIZE);
        # measuring and storing have their own, so this is the API's load, not an outage
        logger.warning("no API database connection free for %s %s: %s", request.method,
                       request.url.path, type(exc).__name__)
        response = problem(request, 503, "Database busy",
                           "every database connection of the API is in use; retry later")
        response.headers["Retry-After"] = str(POOL_RETRY_AFTER_S)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> StrictJSONResponse:
        title = {404: "Not found", 405: "Method not allowed",
                 413: "Content too large"}.get(exc.status_code, "Error")
        response = problem(request, exc.status_code, title, str(exc.detail))
        if exc.status_code == 413:  # the rest of the body is never read: end the connection
            response.headers["Connection"] = "close"
        return response

    @app.exception_handler(DBAPIError)
    async def _database(request: Request, exc: DBAPIError) -> StrictJSONResponse:
        state = str(getattr(exc.orig, "sqlstate", "") or "")
        if state.startswith(DATA_EXCEPTION_CLASS):
            return problem(request, 422, "Invalid request",
                           "a value is not acceptable to the database")
        logger.error("database error on %s %s: %s", request.method, request.url.path,
                     type(exc.orig).__name__)
        return problem(request, 503, "Database unavailable",
                       "the database could not complete the request; retry later")

    @app.exception_handler(OSError)
    async def _unreachable(request: Request, exc: OSError) -> StrictJSONResponse:
        logger.error("database unreachable on %s %s: %s", request.method, request.url.path,
                     type(exc).__name__)
        return problem(request, 503, "Database unavailable",
                       "the database cannot be reached; retry later")

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, exc: ClientDisconnect) -> StrictJSONResponse:  # noqa: ARG001
        # The client closed the connection before its body was in: nothing was done, and
        # nobody is left to read the answer. Not a server error.
        logger.info("client went away before sending its whole body on %s %s",
                    request.method, request.url.path)
        return problem(request, 400, "Client disconnected", "the request body was cut short")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request,
                          exc: Exception) -> StrictJSONResponse:  # noqa: ARG001 - logged by logger.exception
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(request, 500, "Internal error", "an unexpected error occurred")
