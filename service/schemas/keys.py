"""Bodies of /api/v1/keys and /api/v1/audit."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from sustain.service.access.keys import Role
from sustain.service.schemas.common import MAX_NAME_CHARS, Location

KeyName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME_CHARS,
                      pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"),
]
"""A key's name: a resource name without `:`, which separates the key's name from its
process in an agent's id (`agent:{key name}:{agent name}`), so no key's agents are counted as
another's."""


AGENT_LOCATION: JsonDict = {"anyOf": [
    {"required": ["role", "location"],
     "properties": {"role": {"const": Role.agent.value}, "location": {"type": "string"}}},
    {"properties": {"role": {"enum": [r.value for r in Role if r is not Role.agent]},
                    "location": {"type": "null"}}}]}
"""An agent key names its location; a key of another role has none (null or absent)."""


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=AGENT_LOCATION)

    name: KeyName = Field(description="What the key is for (unique among active keys; "
                          "letters, digits, `_`, `.` and `-`).")
    role: Role = Field(description="viewer (read), editor (also write and run), admin (also "
                       "keys and the audit log); agent (only what a `sustain agent` does, "
                       "for its `location`).")
    location: Location | None = Field(
        default=None, description="The location an agent key measures from: required for "
        "the agent role, refused for the others.")

    @model_validator(mode="after")
    def _agent_location(self) -> KeyCreate:
        if (self.role == Role.agent) != (self.location is not None):
            raise PydanticCustomError(
                "location", "an agent key names its location; other roles have none",
                {"field": "location"})
        return self


class KeyRead(BaseModel):
    id: int
    name: str
    role: Role
    location: str | None = Field(default=None, description="An agent key's location.")
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyRead):
    key: str = Field(description="The key itself. Shown only in this response: store it now.")


class AuditRead(BaseModel):
    id: int
    at: datetime
    actor: str = Field(description="The key's name; `SUSTAIN_ADMIN_KEY` for the bootstrap "
                       "key; `anonymous` when the call had no valid key.")
    key_id: int | None
    role: Role | None
    method: str
    path: str
    object_id: str | None = Field(description="The object written, when the call names one.")
    status: int = Field(description="The HTTP status answered.")


class AuditPage(BaseModel):
    items: list[AuditRead]
    next_cursor: str | None = Field(description="Pass as ?cursor= for older entries.")
