"""Field types shared by the resource schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, StringConstraints
from pydantic_core import PydanticCustomError

MAX_DB_ID = 2**63 - 1

Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"),
]
"""A resource name: also used as a metric label, so a restricted alphabet."""


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=63,
                                            pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
LabelValue = Annotated[Text, StringConstraints(max_length=256)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=32)]
DbId = Annotated[int, Field(ge=1, le=MAX_DB_ID)]


def reject_nulls(model: BaseModel, nullable: frozenset[str] = frozenset()) -> None:
    """PATCH bodies: an explicit null may only clear a nullable field."""
    for name in model.model_fields_set - nullable:
        if getattr(model, name) is None:
            raise PydanticCustomError("null_not_allowed", "may not be null", {"field": name})
