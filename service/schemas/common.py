"""Field types shared by the resource schemas."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    BaseModel,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    UrlConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from sustain.service.ticks.locations import MAX_LOCATIONS, location_problem
from sustain.service.ticks.locations import PATTERN as LOCATION_PATTERN

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


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: types in unions are hashed
class Documented:
    """Keywords added to a type's JSON schema (and so to the OpenAPI document) for what a
    validator of the type checks: the validator stays the judge (its 422 names the field),
    the schema says the same rule, so a client built from the document sends what passes.
    A keyword given as None is removed."""

    keywords: Mapping[str, Any]

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler(core_schema)
        for key, value in self.keywords.items():
            if value is None:
                schema.pop(key, None)
            else:
                schema[key] = deepcopy(value)
        return schema


NO_NUL: Mapping[str, Any] = {"not": {"pattern": "[\\x00]"}}
"""What every string of a request body holds: no NUL (PostgreSQL cannot store it, so an input
model refuses it: probes/inputs.py). Said as a character a string must not contain, which a
generator reads as an alphabet to draw from rather than a pattern to match."""
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME_CHARS, pattern=NAME_PATTERN),
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


Text = Annotated[str, AfterValidator(_no_nul), Documented(NO_NUL)]
"""Free text: anything but NUL."""
LABEL_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_LABEL_KEY_CHARS,
                                            pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[Text, StringConstraints(max_length=MAX_LABEL_VALUE_CHARS)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LABELS), Documented({
    "patternProperties": None,
    "propertyNames": {"minLength": 1, "maxLength": MAX_LABEL_KEY_CHARS,
                      "pattern": LABEL_KEY_PATTERN},
    "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE_CHARS, **NO_NUL}})]
"""Label names (keys) are Prometheus label names; pydantic's own schema says so only as
patternProperties, which leave other keys free (said instead as propertyNames)."""
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


SUPPORTED_YEARS_PATTERN = r"^(19[7-9][0-9]|2[0-9]{3})-"
"""The years of [EARLIEST, LATEST] as an RFC 3339 time starts (a time within an offset of
either end may still fall outside)."""
ApiTime = Annotated[datetime, AfterValidator(supported_time),
                    Documented({"pattern": SUPPORTED_YEARS_PATTERN})]
"""A time a caller gives: UTC, within the supported range (else 422 naming the field)."""


def reject_nulls(model: BaseModel, nullable: frozenset[str] = frozenset()) -> None:
    """PATCH bodies: an explicit null may only clear a nullable field."""
    for name in model.model_fields_set - nullable:
        if getattr(model, name) is None:
            raise PydanticCustomError("null_not_allowed", "may not be null", {"field": name})


def not_null(property_schema: dict[str, Any]) -> dict[str, Any] | bool:
    """A property's schema without its `null` branch (and its null default): what a PATCH
    body may give, when reject_nulls refuses null. `False` (never given) when null was all
    the property could be."""
    schema = {k: v for k, v in property_schema.items() if k != "default"}
    branches = schema.pop("anyOf", None)
    if branches is None:
        return False if schema.get("type") == "null" else schema
    kept = [b for b in branches if b != {"type": "null"}]
    if not kept:
        return False
    if len(kept) == 1:
        return {**schema, **kept[0]}
    return {**schema, "anyOf": kept}


def patch_schema(nullable: frozenset[str] = frozenset(),
                 rules: Mapping[str, Any] | None = None
                 ) -> Callable[[dict[str, Any], type[BaseModel]], None]:
    """json_schema_extra of a PATCH body: every property but `nullable` loses its null
    branch (see reject_nulls), and `rules` (JSON Schema keywords over the whole body) are
    added."""

    def extra(schema: dict[str, Any], model: type[BaseModel]) -> None:  # noqa: ARG001
        properties = schema.get("properties", {})
        for name, prop in list(properties.items()):
            if name not in nullable:
                properties[name] = not_null(prop)
        schema.update(rules or {})

    return extra


def _location(value: str) -> str:
    if (problem := location_problem(value)) is not None:
        raise PydanticCustomError("location", problem)
    return value


def _locations(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise PydanticCustomError("locations", "each location is listed once")
    return value


Location = Annotated[str, Field(max_length=63, examples=["eu-west-1"]),
                     AfterValidator(_location),
                     Documented({"pattern": f"^(?:{LOCATION_PATTERN.pattern})$"})]
"""Where a replica or an agent measures from: a DNS label (service/ticks/locations.py)."""
Locations = Annotated[list[Location], Field(min_length=1, max_length=MAX_LOCATIONS),
                      AfterValidator(_locations), Documented({"uniqueItems": True})]
