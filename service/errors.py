"""Domain errors raised inside the service; the API maps each to problem+json in one place."""

from __future__ import annotations

from collections.abc import Sequence


class ServiceError(Exception):
    status = 500
    title = "Internal error"


class NotFoundError(ServiceError):
    status = 404
    title = "Not found"

    def __init__(self, resource: str, ident: object) -> None:
        super().__init__(f"{resource} {ident} does not exist")


class ConflictError(ServiceError):
    status = 409
    title = "Conflict"


class TooLargeError(ServiceError):
    """More than a bound on bytes allows (an upload's parts together, say): 413."""

    status = 413
    title = "Content too large"


class UnavailableError(ServiceError):
    """Temporarily unable (e.g. the write buffer is nearly full); retry later."""

    status = 503
    title = "Service unavailable"


class TooManyRequestsError(ServiceError):
    """The caller (or all callers together) has as many of these in flight as allowed: 429,
    with Retry-After: `retry_after_s` seconds."""

    status = 429
    title = "Too many requests"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class FieldError(ServiceError):
    """A value that passed schema validation but breaks a rule across fields or stored state;
    `more` adds further (field, message) problems of the same request."""

    status = 422
    title = "Invalid request"

    def __init__(self, field: str, message: str, *more: tuple[str, str]) -> None:
        self.problems = [(field, message), *more]
        super().__init__("; ".join(f"{f}: {m}" for f, m in self.problems))
        self.field = field
        self.message = message

    @classmethod
    def of(cls, problems: Sequence[tuple[str, str]]) -> FieldError:
        """One error for (field, message) problems, at least one."""
        (field, message), *more = problems
        return cls(field, message, *more)


class UnauthenticatedError(ServiceError):
    """No key, or one that is unknown or revoked: 401 with `WWW-Authenticate: Bearer`."""

    status = 401
    title = "Unauthorized"


class ForbiddenError(ServiceError):
    """A valid key whose role may not do this: 403."""

    status = 403
    title = "Forbidden"
