"""Replicas: every sustain process on this database, and what this one has scheduled."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class ReplicaRead(BaseModel):
    id: str
    started_at: datetime
    heartbeat_at: datetime
    in_flight: int = Field(description="Runs executing on the replica at its last heartbeat.")
    stopping: bool = Field(description="Shutting down: it claims no more ticks.")
    alive: bool = Field(description="Its heartbeat is fresher than 3 intervals.")


class ScheduledJob(BaseModel):
    probe_id: int
    probe: str
    interval_seconds: int | None
    cron: str | None
    jitter_seconds: float
    next_fire_at: datetime | None


class ThisReplica(BaseModel):
    id: str
    stopping: bool
    in_flight: int
    jobs: list[ScheduledJob]
