"""Whether anyone can get in yet. With no bootstrap admin key (SUSTAIN_ADMIN_KEY) and no stored
key a person can use, every call that needs a key answers 401 and the status page's sign-in
accepts nothing; `sustain serve` says so when it starts and the sign-in page says so to whoever
opens it, each with the two ways in (NO_KEY_REMEDIES)."""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.access.keys import Role
from sustain.service.db.models import ApiKey

NO_KEY_REMEDIES = (
    "run `sustain keys create --name admin --role admin` on the service's database (the same "
    "SUSTAIN_DATABASE_URL or SUSTAIN_DATA_DIR; it works while the service runs) and use the "
    "key it prints, or set SUSTAIN_ADMIN_KEY (`sustain keys generate` prints a value) and "
    "restart")
"""The two ways in, worded once for the start log and the sign-in page."""


async def person_key_exists(session: AsyncSession) -> bool:
    """Whether an active (not revoked) viewer, editor or admin key is stored: one a person can
    sign in or call the API with (an agent key does neither)."""
    query = select(exists().where(ApiKey.revoked_at.is_(None),
                                  ApiKey.role != Role.agent.value))
    return bool((await session.execute(query)).scalar())
