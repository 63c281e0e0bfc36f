"""Field types shared by the resource schemas."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    BaseModel,
    Field,
    StringConstraints,
    UrlConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from sustain.service.ticks.locations import MAX_LOCATIONS, location_problem

MAX_DB_ID = 2**63 - 1

# How much a caller may store in one object: every caller-given string and collection is
# bounded, so that no write can make every later read (and every run or notification built
# from it) large. Beyond a bound: 422 naming the field.
MAX_NAME_CHARS = 100
"""A resource's name (endpoint, probe, workload, SLO, notifier, key)."""
MAX_LABELS = 32
"""Labels of one object (and label matchers of one SLO or notifier)."""
MAX_LABEL_KEY_CHARS = 63
MAX_LABEL_VALUE_CHARS = 256
MAX_HEADERS = 64
"""Extra request headers of one endpoint."""
MAX_HEADER_NAME_CHARS = 128
MAX_HEADER_VALUE_CHARS = 4096
MAX_HEADER_BYTES = 16 * 1024
"""Bytes of an endpoint's extra headers, names and values together (as sent, ASCII): what
common servers accept in a whole request head (8-16 KiB) leaves no room for more."""
MAX_URL_CHARS = 2048
"""A URL sustain connects to (an endpoint's API root and metrics, a notifier's URL)."""
MAX_MODEL_CHARS = 512
MAX_DESCRIPTION_CHARS = 2000
"""Free text: an SLO's description, a silence's comment."""

Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME_CHARS,
                      pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"),
]
"""A resource name: also used as a metric label, so a restricted alphabet."""
URL_WITH_SCHEME = "must be a URL with a scheme, e.g. http://host:8000/v1"


def _with_scheme(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A URL typed without its scheme (`vllm:8000/v1`, `127.0.0.1:8000`) is refused saying
    so, not in the URL parser's words (`relative URL without a base`, or a scheme `vllm`
    that is not http)."""
    try:
        return handler(value)
    except ValidationError:
        if isinstance(value, str) and "://" not in value:
            raise PydanticCustomError("url_scheme", URL_WITH_SCHEME) from None
        raise


Url = Annotated[AnyHttpUrl, UrlConstraints(max_length=MAX_URL_CHARS),
                WrapValidator(_with_scheme)]
"""An http(s) URL of at most MAX_URL_CHARS characters."""


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_LABEL_KEY_CHARS,
                                            pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
LabelValue = Annotated[Text, StringConstraints(max_length=MAX_LABEL_VALUE_CHARS)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LABELS)]
DbId = Annotated[int, Field(ge=1, le=MAX_DB_ID)]

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2999, 12, 31, 23, 59, 59, tzinfo=UTC)
"""The times a caller may give (query parameters, silence bounds). Wide enough for any data and
any "forever" silence, and far enough from the calendar's ends (years 1 and 9999) that window
arithmetic (a time minus 400 days, plus a repeat interval) can never overflow."""


def supported_time(value: datetime) -> datetime:
    """`value` in UTC (one without an offset is UTC), within [EARLIEST, LATEST]."""
    try:
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise PydanticCustomError(
            "time_range", "must be between {earliest} and {latest}",
            {"earliest": f"{EARLIEST:%Y-%m-%d}", "latest": f"{LATEST:%Y-%m-%d}"})
    return moment


ApiTime = Annotated[datetime, AfterValidator(supported_time)]
"""A time a caller gives: UTC, within the supported range (else 422 naming the field)."""


def reject_nulls(model: BaseModel, nullable: frozenset[str] = frozenset()) -> None:
    """PATCH bodies: an explicit null may only clear a nullable field."""
    for name in model.model_fields_set - nullable:
        if getattr(model, name) is None:
            raise PydanticCustomError("null_not_allowed", "may not be null", {"field": name})


def _location(value: str) -> str:
    if (problem := location_problem(value)) is not None:
        raise PydanticCustomError("location", problem)
    return value


def _locations(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise PydanticCustomError("locations", "each location is listed once")
    return value


Location = Annotated[str, Field(max_length=63, examples=["eu-west-1"]),
                     AfterValidator(_location)]
"""Where a replica or an agent measures from: a DNS label (service/ticks/locations.py)."""
Locations = Annotated[list[Location], Field(min_length=1, max_length=MAX_LOCATIONS),
                      AfterValidator(_locations)]
