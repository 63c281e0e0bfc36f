"""/api/v1/notifiers: where alert notifications go (JSON webhook, Slack, Alertmanager)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from sustain.service.api.deps import SessionDep
from sustain.service.api.schemas.common import MAX_DB_ID
from sustain.service.api.schemas.notifiers import NotifierCreate, NotifierRead, NotifierUpdate
from sustain.service.db import crud
from sustain.service.db.models import Notifier
from sustain.service.errors import FieldError

router = APIRouter(prefix="/notifiers", tags=["notifiers"])

NotifierId = Annotated[int, Path(ge=1, le=MAX_DB_ID)]


def notifier_read(notifier: Notifier) -> NotifierRead:
    return NotifierRead.model_validate(notifier, from_attributes=True)


def notifier_columns(body: NotifierCreate | NotifierUpdate,
                     exclude_unset: bool = False) -> dict[str, object]:
    values = body.model_dump(mode="json", exclude_unset=exclude_unset)
    if values.get("kind") is None:
        values.pop("kind", None)
    return values


def notifier_columns_of(notifier: Notifier) -> dict[str, object]:
    return {"url": notifier.url, "url_secret_ref": notifier.url_secret_ref,
            "signing_secret_ref": notifier.signing_secret_ref}


def check_merged(kind: str, values: dict[str, object]) -> None:
    """What a PATCH leaves must still be a valid notifier of its kind."""
    if (values["url"] is None) == (values["url_secret_ref"] is None):
        raise FieldError("url", "give exactly one of url and url_secret_ref")
    if kind == "slack" and values["url"] is not None:
        raise FieldError("url", "a Slack webhook URL is a secret: give url_secret_ref")
    if kind != "webhook" and values["signing_secret_ref"] is not None:
        raise FieldError("signing_secret_ref", "belongs to webhook notifiers only")


@router.post("", status_code=status.HTTP_201_CREATED)
async def create_notifier(body: NotifierCreate, session: SessionDep) -> NotifierRead:
    notifier = await crud.create(session, Notifier, notifier_columns(body), "notifier")
    await session.commit()
    return notifier_read(notifier)


@router.get("")
async def list_notifiers(session: SessionDep) -> list[NotifierRead]:
    return [notifier_read(n) for n in await crud.list_all(session, Notifier)]


@router.get("/{notifier_id}")
async def get_notifier(notifier_id: NotifierId, session: SessionDep) -> NotifierRead:
    return notifier_read(await crud.get(session, Notifier, notifier_id, "notifier"))


@router.patch("/{notifier_id}")
async def update_notifier(notifier_id: NotifierId, body: NotifierUpdate,
                          session: SessionDep) -> NotifierRead:
    notifier = await crud.get(session, Notifier, notifier_id, "notifier")
    crud.check_unmanaged(notifier, "notifier")
    changes = notifier_columns(body, exclude_unset=True)
    check_merged(notifier.kind, {**notifier_columns_of(notifier), **changes})
    notifier = await crud.update(session, notifier, changes, "notifier")
    await session.commit()
    return notifier_read(notifier)


@router.delete("/{notifier_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_notifier(notifier_id: NotifierId, session: SessionDep) -> None:
    notifier = await crud.get(session, Notifier, notifier_id, "notifier")
    crud.check_unmanaged(notifier, "notifier")
    await crud.delete(session, notifier, "notifier")
    await session.commit()
