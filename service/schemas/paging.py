"""The shape of every list answer: one page of items and the cursor of the next."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """A page of a list, in the list's order. Pass `next_cursor` back as `?cursor=` (with
    the same filters) for the next page; it is null on the last one. Items added while a
    client pages appear on a later page or not at all, never twice."""

    items: list[T]
    next_cursor: str | None = Field(
        default=None, description="Pass as ?cursor= for the next page; null on the last.")
