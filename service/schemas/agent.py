"""Bodies of /api/v1/agent: what a `sustain agent` sends and is answered."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from sustain.probes.inputs import InputModel
from sustain.probes.measure.run_sketches import METRICS
from sustain.probes.measure.sample import JOB_PHASES, ErrorClass
from sustain.service.runs import upload
from sustain.service.runs.label_sets import SAMPLE_STAGES
from sustain.service.schemas.common import MAX_DB_ID, ApiTime, DbId
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


# --- the agent upload's body (msgpack), as runs/upload.py and scheduling/agent_runs.py read it

def _whole(high: int, low: int = 0, nullable: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": low, "maximum": high}
    return {"anyOf": [schema, {"type": "null"}]} if nullable else schema


RUN_MS = "x-sustain-run-ms"
"""Marks a time in ms that is at most a run's longest length: the served document gives it
that maximum from the service's settings (service/api/openapi.py)."""


def _ms(nullable: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number", "minimum": 0, RUN_MS: True, "description":
                              "ms, at most the run's longest length (SUSTAIN_MAX_RUN_S plus "
                              "its grace)"}
    return {"anyOf": [schema, {"type": "null"}]} if nullable else schema


def _text(nullable: bool = True) -> dict[str, Any]:
    return {"type": ["string", "null"]} if nullable else {"type": "string"}


def _flag(nullable: bool = True) -> dict[str, Any]:
    return {"type": ["boolean", "null"]} if nullable else {"type": "boolean"}


def _pairs(names: Iterable[str], most: int) -> dict[str, Any]:
    return {"type": ["array", "null"], "maxItems": most, "items": {
        "type": "array", "prefixItems": [{"enum": sorted(names)}, _ms()],
        "minItems": 2, "maxItems": 2}}


UNIX_SECONDS = {"type": "number", "minimum": upload.EPOCH_MIN, "maximum": upload.EPOCH_MAX,
                "description": "Unix seconds (UTC), between 2020 and 2200."}
def _sample_row() -> tuple[tuple[str, dict[str, Any]], ...]:
    """A sample row's values by position, with their names, as runs/upload.py checks them."""
    fields: dict[int, tuple[str, dict[str, Any]]] = {
        0: ("seq", _whole(upload.MAX_WHOLE)),
        1: ("stage", _whole(upload.MAX_STAGE)),
        5: ("itl_ms", {"type": "array", "items": _ms(), "description": "Inter-token gaps, "
                       "at most SUSTAIN_AGENT_UPLOAD_MAX_ITL_VALUES."}),
        8: ("tokens_server_counted", _flag(nullable=False)),
        10: ("http_status", _whole(upload.MAX_HTTP_STATUS, nullable=True)),
        11: ("error_class", {"enum": [*(e.value for e in ErrorClass), None]}),
        16: ("turn", _whole(upload.MAX_WHOLE, nullable=True)),
        17: ("session_end", _flag(nullable=False)),
        18: ("quality", _flag()),
        20: ("audio_s", {"type": ["number", "null"], "minimum": 0,
                         "maximum": upload.MAX_AUDIO_S}),
        22: ("stages_ms", _pairs(SAMPLE_STAGES, upload.MAX_SAMPLE_STAGES)),
        23: ("hit", _flag()),
        upload.PHASES: ("phases_ms", _pairs(JOB_PHASES, len(JOB_PHASES))),
        upload.TRACE_ID: ("trace_id", {"type": ["string", "null"],
                                       "pattern": "^(?!0{32}$)[0-9a-f]{32}$"}),
    }
    fields |= {i: (name, _ms(nullable=i not in upload.REQUIRED_TIMINGS))
               for i, name in upload.TIMINGS.items()}
    fields |= {i: (name, _whole(upload.MAX_WHOLE,
                                nullable=i not in upload.REQUIRED_COUNTS_OF_ROW))
               for i, name in upload.COUNTS.items()}
    fields |= {i: (name, _text()) for i, name in upload.TEXTS.items()}
    fields |= {i: (name, _flag()) for i, name in upload.FLAGS.items()}
    # a KeyError here: the wire row grew a value this schema does not describe yet
    return (*(fields[i] for i in range(upload.ROW_FIELDS - 1)), ("sent_at", UNIX_SECONDS))


SAMPLE_ROW = _sample_row()
"""A sample row as this release's agent packs it (probes.workers.wire.sample_row, then the
wall time of its send): its values by position."""
COUNTS = {"type": ["object", "null"], "additionalProperties": False,
          "required": sorted(upload.REQUIRED_COUNTS),
          "properties": {
              **{name: {"type": "integer", "minimum": 0, "maximum": 2**53,
                        **({} if name in upload.REQUIRED_COUNTS else {"type": ["integer", "null"]})}
                 for name in upload.INT_COUNTS},
              **{name: {"type": "number", "minimum": 0, "maximum": 2**53,
                        **({} if name in upload.REQUIRED_COUNTS else {"type": ["number", "null"]})}
                 for name in upload.FLOAT_COUNTS}}}
FINAL = {
    "type": "object", "required": ["status"],
    "description": "The run's final record: what the agent computed from its samples.",
    "properties": {
        "status": {"enum": sorted(upload.UPLOAD_STATUSES)},
        "error": {"type": ["string", "null"], "maxLength": upload.MAX_TEXT_CHARS},
        "summary": {"type": ["object", "null"], "description": "The run's summary: a RunReport "
                    "(#/components/schemas/RunReport) with no key it does not name; RAG "
                    "stages, job phases, error classes, image sizes and currencies from their "
                    "closed sets, server series the endpoint's."},
        "counts": COUNTS,
        "sketches": {"type": ["array", "null"], "maxItems": upload.MAX_SKETCHES, "items": {
            "type": "array", "minItems": 3, "maxItems": 3, "prefixItems": [
                {"type": "integer", "minimum": 0, "maximum": 9_999},
                {"enum": list(METRICS)},
                {"type": "string", "contentEncoding": "binary",
                 "maxLength": upload.MAX_SKETCH_BYTES,
                 "description": "A serialised sketch (msgpack bin)."}]}},
        "server_series": {"type": ["object", "null"], "maxProperties": upload.MAX_SERIES,
                          "propertyNames": {"minLength": 1, "maxLength": 200},
                          "additionalProperties": {
                              "type": "array", "maxItems": upload.MAX_SERIES_POINTS,
                              "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                        "prefixItems": [UNIX_SECONDS, {"type": "number"}]}}},
    }}
UPLOAD_PART = {
    "type": "object",
    "description": "One part of a finished run, a msgpack map. Every part of an upload names "
    "the same parts, probe_id, tick, run_id, started_at and dropped; the last part (part = "
    "parts - 1), and only it, carries `final`. The run started within an hour of its tick "
    "(give or take ten minutes of clock difference), and every sample was sent between ten "
    "minutes before the start and the run's longest length after it.",
    "required": ["upload_id", "part", "parts", "probe_id", "tick", "started_at", "dropped",
                 "samples"],
    "properties": {
        "upload_id": {"type": "string", "format": "uuid"},
        "part": {"type": "integer", "minimum": 0, "maximum": upload.MAX_PARTS - 1,
                 "description": "From 0, below parts."},
        "parts": {"type": "integer", "minimum": 1, "maximum": upload.MAX_PARTS},
        "probe_id": {"type": "integer", "minimum": 1, "maximum": MAX_DB_ID},
        "tick": UNIX_SECONDS,
        "run_id": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_DB_ID,
                   "description": "The claimed run; null: measured without a claim."},
        "started_at": UNIX_SECONDS,
        "dropped": {"type": "integer", "minimum": 0, "maximum": upload.MAX_WHOLE},
        "samples": {"type": "array", "maxItems": upload.MAX_PART_SAMPLES, "items": {
            "type": "array", "minItems": len(SAMPLE_ROW), "maxItems": len(SAMPLE_ROW),
            "prefixItems": [{**schema, "title": name} for name, schema in SAMPLE_ROW],
            "description": f"A sample row: {', '.join(name for name, _ in SAMPLE_ROW)}. A row "
            f"of an earlier release has {upload.OLD_UPLOAD_FIELDS} values or more: the first "
            "ones of these, then sent_at."}},
        "final": {"anyOf": [FINAL, {"type": "null"}]},
    },
}
"""The agent upload's body, for the OpenAPI document (the route's requestBody)."""
