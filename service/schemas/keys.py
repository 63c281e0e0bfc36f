"""Bodies of /api/v1/keys and /api/v1/audit."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from sustain.service.domain.keys import Role
from sustain.service.schemas.common import Name


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name = Field(description="What the key is for (unique among active keys).")
    role: Role = Field(description="viewer (read), editor (also write and run), admin (also "
                       "keys and the audit log).")


class KeyRead(BaseModel):
    id: int
    name: str
    role: Role
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
