"""Bodies of /api/v1/agent: what a `sustain agent` sends and is answered."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from sustain.probes.inputs import InputModel
from sustain.service.schemas.common import ApiTime, DbId
from sustain.service.schemas.endpoints import EndpointRead
from sustain.service.schemas.probes import ProbeRead

AGENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
AgentName = Annotated[str, StringConstraints(pattern=AGENT_NAME_PATTERN)]
"""One agent process: its host name and process id by default (the key names the agent's
fleet; this tells its processes apart)."""
MAX_ENDED = 10_000


class AgentHeartbeat(InputModel):
    agent: AgentName
    in_flight: int = Field(ge=0, le=100_000, description="Runs measuring now.")
    running: list[DbId] = Field(default_factory=list, max_length=MAX_ENDED,
                                description="Those of them with a run id (claimed online): "
                                "the answer says which to stop.")
    spooled_runs: int = Field(ge=0, le=10_000_000,
                              description="Finished runs on the agent's disk, not uploaded.")
    clock_offset_ms: float | None = Field(
        default=None, ge=-1e9, le=1e9,
        description="The agent's wall clock minus the service's, as it measured it on the "
        "previous heartbeat (the midpoint of its round trip against server_time); reported, "
        "never used to compute a latency.")
    stopping: bool = False


class AgentBeat(BaseModel):
    server_time: datetime = Field(description="The service's wall clock when it answered.")
    location: str
    agent_id: str = Field(description="The id this agent's runs are claimed by.")
    peers: list[str] = Field(description="The other live replicas and agents of the "
                             "location: who may run a tick while the service is unreachable.")
    assignments_version: str = Field(description="Changes whenever the assignments do.")
    cancelled: list[DbId] = Field(
        default_factory=list, description="Of the runs this agent said are in flight, those "
        "to stop (a cancel was asked for, or their probe was deleted).")


class Assignment(BaseModel):
    """A probe of the agent's location, with every endpoint it uses (secrets stay
    references: the agent resolves them on its side)."""

    probe: ProbeRead
    endpoint: EndpointRead
    rag_embed: EndpointRead | None = None
    rag_rerank: EndpointRead | None = None


class Assignments(BaseModel):
    """A page of the location's assignments, by probe id."""

    location: str
    version: str = Field(description="The version of all the location's assignments (the "
                         "heartbeat's `assignments_version`), read before this page.")
    probes: list[Assignment]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last.")


class AgentClaim(InputModel):
    agent: AgentName
    probe_id: DbId
    tick: ApiTime = Field(strict=False, description="The tick this firing is for (UTC).")
    ended: list[DbId] = Field(
        default_factory=list, max_length=MAX_ENDED,
        description="Runs of this agent that ended but are not uploaded yet: they do not "
        "make the probe busy.")


class AgentClaimed(BaseModel):
    status: Literal["running", "skipped", "taken"] = Field(
        description="running: measure it (run_id); skipped: a run of the probe is still "
        "going in this location; taken: another replica or agent claimed it.")
    run_id: DbId | None = None


class UploadStored(BaseModel):
    outcome: Literal["part", "stored", "duplicate", "partition", "dropped"] = Field(
        description="part: kept until the last part; stored: the run is stored; duplicate: "
        "this upload was stored before; partition: the tick was measured elsewhere too, kept "
        "as a sample-free skipped record; dropped: nothing to store it in (its run was "
        "cancelled or its probe deleted), with why.")
    run_id: DbId | None = None
    missing: list[int] = Field(default_factory=list,
                               description="Parts not received yet (send them again).")
    detail: str | None = None
