"""/api/v1/keys (admin): create a key (shown once), list keys, revoke one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, status

from sustain.service.api import cursor as cursors
from sustain.service.api.auth import PrincipalDep
from sustain.service.api.deps import SessionDep
from sustain.service.api.paging import PageDep
from sustain.service.db import keys as key_queries
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.keys import KeyCreate, KeyCreated, KeyRead
from sustain.service.schemas.paging import Page

router = APIRouter(prefix="/keys", tags=["keys"])
CURSOR_KIND = "keys"

KeyId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_key(body: KeyCreate, session: SessionDep, caller: PrincipalDep) -> KeyCreated:
    """A new key. The answer's `key` is the only time the key is ever shown."""
    created = await key_queries.create(session, body.name, body.role, caller.name,
                                       body.location)
    await session.commit()
    return created


@router.get("")
async def list_keys(session: SessionDep, paging: PageDep) -> Page[KeyRead]:
    """Every key in id order, revoked ones included, a page at a time; never the keys
    themselves."""
    rows = await key_queries.page(session, cursors.decode(CURSOR_KIND, paging.cursor),
                                  paging.fetch)
    page, following = paging.cut(rows, lambda k: cursors.encode(CURSOR_KIND, k.id))
    return Page(items=[key_queries.read(k) for k in page], next_cursor=following)


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_key(key_id: KeyId, session: SessionDep) -> None:
    """Revoke at once (every replica looks keys up per request); its sign-ins end too."""
    await key_queries.revoke(session, key_id, datetime.now(UTC))
    await session.commit()
