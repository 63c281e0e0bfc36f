"""Run bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from probes.runner import RunReport
from service.api.schemas.common import DbId

RunStatus = Literal["pending", "running", "succeeded", "failed", "abandoned", "invalid"]


class RunRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: DbId
    probe_id: DbId
    trigger: Literal["schedule", "manual"]
    status: RunStatus
    scheduled_for: datetime
    claimed_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    summary: RunReport | None


class RunList(BaseModel):
    items: list[RunRead]


class RunAccepted(BaseModel):
    """202 answer to 'run now': poll `href` for the result."""

    id: DbId
    status: RunStatus
    href: str
