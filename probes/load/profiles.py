"""Load profiles: how requests are issued during a run (SPEC section 5)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Profile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_in_flight: int = Field(
        default=256, ge=1, le=10_000,
        description="Cap on requests in flight; a request that must wait shows up as lag.",
    )


class SingleProfile(_Profile):
    """One request: a cheap heartbeat."""

    kind: Literal["single"] = "single"


class ConstantProfile(_Profile):
    """Open loop at a fixed rate: request k is intended at k / rate seconds."""

    kind: Literal["constant"] = "constant"
    rate: float = Field(gt=0, le=10_000, description="Requests per second.")
    duration_s: float = Field(gt=0, le=86_400, description="Seconds of sending.")
    max_requests: int | None = Field(default=None, ge=1, le=10_000_000)


LoadProfile = Annotated[SingleProfile | ConstantProfile, Field(discriminator="kind")]

PROFILE_KINDS = frozenset({"single", "constant"})
"""The `kind` tags of LoadProfile."""
