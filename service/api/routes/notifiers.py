"""/api/v1/notifiers: where alert notifications go (any kind the notifier registry knows:
JSON webhook, Slack, Alertmanager)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from sustain.service.alerting.notifiers import REGISTRY, NotifierCreate
from sustain.service.api import cursor as cursors
from sustain.service.api.deps import SessionDep, StateDep
from sustain.service.api.paging import PageDep
from sustain.service.api.reach import refuse_unreachable
from sustain.service.db import crud, quotas
from sustain.service.db import notifiers as notifier_queries
from sustain.service.db.models import Notifier
from sustain.service.schemas.common import MAX_DB_ID
from sustain.service.schemas.notifiers import NotifierRead, NotifierUpdate
from sustain.service.schemas.paging import Page

router = APIRouter(prefix="/notifiers", tags=["notifiers"])
CURSOR_KIND = "notifiers"

NotifierId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_notifier(body: NotifierCreate, session: SessionDep,
                          state: StateDep) -> NotifierRead:
    """422 naming `url` when the egress policy refuses its host, or the `*_secret_ref` the
    secret policy refuses (a URL behind url_secret_ref is judged at delivery); 409 when
    SUSTAIN_MAX_NOTIFIERS notifiers exist."""
    values = notifier_queries.columns(body)
    refuse_unreachable(values, state.reach)
    await quotas.make_room(session, "notifier", state.settings.max_notifiers)
    notifier = await crud.create(session, Notifier, values, "notifier")
    await session.commit()
    return notifier_queries.read(notifier)


@router.get("")
async def list_notifiers(session: SessionDep, paging: PageDep) -> Page[NotifierRead]:
    """Notifiers in id order (oldest first), a page at a time."""
    rows = await crud.page(session, Notifier, cursors.decode(CURSOR_KIND, paging.cursor),
                           paging.fetch)
    page, following = paging.cut(rows, lambda n: cursors.encode(CURSOR_KIND, n.id))
    return Page(items=[notifier_queries.read(n) for n in page], next_cursor=following)


@router.get("/{notifier_id}")
async def get_notifier(notifier_id: NotifierId, session: SessionDep) -> NotifierRead:
    return notifier_queries.read(await crud.get(session, Notifier, notifier_id, "notifier"))


@router.patch("/{notifier_id}")
async def update_notifier(notifier_id: NotifierId, body: NotifierUpdate,
                          session: SessionDep, state: StateDep) -> NotifierRead:
    notifier = await crud.get(session, Notifier, notifier_id, "notifier")
    crud.check_unmanaged(notifier, "notifier")
    changes = notifier_queries.columns(body, partial=True)
    refuse_unreachable(changes, state.reach)
    REGISTRY.check_merged(notifier.kind, {**notifier_queries.spec_columns(notifier), **changes})
    notifier = await crud.update(session, notifier, changes, "notifier")
    await session.commit()
    return notifier_queries.read(notifier)


@router.delete("/{notifier_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_notifier(notifier_id: NotifierId, session: SessionDep) -> None:
    notifier = await crud.get(session, Notifier, notifier_id, "notifier")
    crud.check_unmanaged(notifier, "notifier")
    await crud.delete(session, notifier, "notifier")
    await session.commit()
