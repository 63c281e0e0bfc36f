"""Replicas: every sustain process on this database, and what this one has scheduled."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from sustain.probes.renamed import old_name


class ReplicaRead(BaseModel):
    id: str
    started_at: datetime
    heartbeat_at: datetime
    in_flight: int = Field(description="Runs executing on the replica at its last heartbeat.")
    stopping: bool = Field(description="Shutting down: it claims no more ticks.")
    alive: bool = Field(description="Its heartbeat is fresher than 3 intervals.")
    location: str = Field(default="default", description="Where it measures from.")
    kind: str = Field(default="replica", description="`replica` (sustain serve) or `agent` "
                      "(sustain agent, over the API).")
    clock_offset_ms: float | None = Field(
        default=None, description="An agent's wall clock minus the service's, as it measured "
        "it (reported only: latencies come from its monotonic clock).")
    spooled_runs: int | None = Field(
        default=None, description="Finished runs an agent holds on disk, not uploaded yet.")


class ScheduledJob(BaseModel):
    probe_id: int
    probe: str
    interval_s: int | None
    cron: str | None
    jitter_s: float
    next_fire_at: datetime | None

    interval_seconds = old_name("interval_s", int | None)  # type: ignore[pydantic-field]
    jitter_seconds = old_name("jitter_s", float)  # type: ignore[pydantic-field]


class ThisReplica(BaseModel):
    id: str
    location: str = "default"
    stopping: bool
    in_flight: int
    jobs: list[ScheduledJob]
