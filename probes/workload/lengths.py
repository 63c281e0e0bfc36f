"""Input-length distributions for synthetic prompts, sampled per request from a seed."""

from __future__ import annotations

import random
from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from sustain.probes.inputs import InputModel

MAX_INPUT_TOKENS = 200_000


class _Length(InputModel):
    """A distribution of prompt lengths, in tokens."""


class FixedLength(_Length):
    kind: Literal["fixed"] = "fixed"
    tokens: int = Field(ge=1, le=MAX_INPUT_TOKENS)


class UniformLength(_Length):
    """Uniform over [min, max], both included."""

    kind: Literal["uniform"] = "uniform"
    min: int = Field(ge=1, le=MAX_INPUT_TOKENS)
    max: int = Field(ge=1, le=MAX_INPUT_TOKENS)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.min > self.max:
            raise PydanticCustomError("order", "min must not exceed max", {"field": "min"})
        return self


class NormalLength(_Length):
    """Normal with the given mean and standard deviation, rounded, clipped to [1, max]."""

    kind: Literal["normal"] = "normal"
    mean: float = Field(gt=0, le=MAX_INPUT_TOKENS)
    stddev: float = Field(ge=0, le=MAX_INPUT_TOKENS)
    max: int = Field(default=MAX_INPUT_TOKENS, ge=1, le=MAX_INPUT_TOKENS)


InputLength = Annotated[FixedLength | UniformLength | NormalLength, Field(discriminator="kind")]


def sample_length(length: InputLength, rng: random.Random) -> int:
    if isinstance(length, FixedLength):
        return length.tokens
    if isinstance(length, UniformLength):
        return rng.randint(length.min, length.max)
    return max(1, min(length.max, round(rng.gauss(length.mean, length.stddev))))


def longest(length: InputLength) -> int:
    """The most tokens a draw of `length` can give."""
    return length.tokens if isinstance(length, FixedLength) else length.max
