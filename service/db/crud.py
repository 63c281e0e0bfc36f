"""Create, read, update and delete for named resources, with constraint violations turned into
domain errors (duplicate name -> 409) instead of database exceptions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import NamedResource
from sustain.service.errors import ConflictError, FieldError, NotFoundError

UNIQUE_VIOLATION = "23505"
FOREIGN_KEY_VIOLATION = "23503"


M = TypeVar("M", bound=NamedResource)


def _sqlstate(exc: IntegrityError) -> str | None:
    orig = exc.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return None if state is None else str(state)


async def flush(session: AsyncSession, resource: str, name: object = None) -> None:
    try:
        await session.flush()
    except IntegrityError as exc:
        await session.rollback()
        state = _sqlstate(exc)
        if state == UNIQUE_VIOLATION:
            raise ConflictError(f"a {resource} named {name!r} already exists") from None
        if state == FOREIGN_KEY_VIOLATION:
            raise ConflictError(f"{resource} refers to, or is referred to by, another object"
                                ) from None
        raise FieldError(resource, "violates a database constraint") from None


async def get(session: AsyncSession, model: type[M], ident: int, resource: str) -> M:
    obj = await session.get(model, ident)
    if obj is None:
        raise NotFoundError(resource, ident)
    return obj


async def get_by_name(session: AsyncSession, model: type[M], name: str) -> M | None:
    result = await session.execute(select(model).where(model.name == name))
    return result.scalar_one_or_none()


async def create(session: AsyncSession, model: type[M], values: dict[str, Any],
                 resource: str) -> M:
    obj = model(**values)
    session.add(obj)
    await flush(session, resource, values.get("name"))
    await session.refresh(obj)
    return obj


async def update(session: AsyncSession, obj: M, changes: dict[str, Any], resource: str) -> M:
    for key, value in changes.items():
        setattr(obj, key, value)
    await flush(session, resource, changes.get("name"))
    await session.refresh(obj)
    return obj


async def delete(session: AsyncSession, obj: NamedResource, resource: str) -> None:
    await session.delete(obj)
    await flush(session, resource)


async def list_all(session: AsyncSession, model: type[M]) -> Sequence[M]:
    return (await session.execute(select(model).order_by(model.id))).scalars().all()


async def page(session: AsyncSession, model: type[M], after_id: int | None,
               limit: int) -> Sequence[M]:
    """At most `limit` objects in id order, those after `after_id` (a page's last id)."""
    query = select(model).order_by(model.id).limit(limit)
    if after_id is not None:
        query = query.where(model.id > after_id)
    return (await session.execute(query)).scalars().all()


def check_unmanaged(obj: NamedResource, resource: str) -> None:
    """Objects a config file owns are changed in the file, not over REST."""
    if obj.managed_by is not None:
        raise ConflictError(f"{resource} {obj.name!r} is managed by the config file "
                            f"{obj.managed_by}; change it there")
