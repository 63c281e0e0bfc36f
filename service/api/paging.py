"""Paging of every list route: `?limit=` (default SUSTAIN_PAGE_SIZE, at most
SUSTAIN_MAX_PAGE_SIZE; beyond it a 422 naming `query.limit`) and `?cursor=` (the
`next_cursor` of the page before). Lists page by keyset (the last row's sort key, ids being
unique), so a page never repeats or skips a row because rows were added meanwhile.

Routes ask their query for `limit + 1` rows: the extra one only says that there is a next
page, so the last page has a null `next_cursor` and no empty page follows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Query

from sustain.service.api.deps import StateDep
from sustain.service.errors import FieldError

R = TypeVar("R")

LIMIT_FIELD = "query.limit"
MAX_CURSOR_CHARS = 1000


@dataclass(frozen=True, slots=True)
class PageParams:
    limit: int
    """Items on this page."""
    cursor: str | None
    """Where it starts (opaque; decode it with the list's cursor kind)."""

    @property
    def fetch(self) -> int:
        """Rows to ask the query for: one more than the page, to learn whether one follows."""
        return self.limit + 1

    def cut(self, rows: Sequence[R], key: Callable[[R], str]) -> tuple[list[R], str | None]:
        """The page's rows of `rows` (fetched with `fetch`), and the cursor after its last
        row (`key` encodes it) when more rows follow, else None."""
        page = list(rows[:self.limit])
        return page, key(page[-1]) if len(rows) > self.limit else None


def page_params(
    state: StateDep,
    limit: Annotated[int | None, Query(
        ge=1, description="Items per page (default SUSTAIN_PAGE_SIZE, at most "
        "SUSTAIN_MAX_PAGE_SIZE).")] = None,
    cursor: Annotated[str | None, Query(
        max_length=MAX_CURSOR_CHARS,
        description="The `next_cursor` of the previous page.")] = None,
) -> PageParams:
    settings = state.settings
    if limit is None:
        limit = min(settings.page_size, settings.max_page_size)
    elif limit > settings.max_page_size:
        raise FieldError(LIMIT_FIELD, f"at most {settings.max_page_size:,} items per page "
                                      "(SUSTAIN_MAX_PAGE_SIZE)")
    return PageParams(limit=limit, cursor=cursor)


PageDep = Annotated[PageParams, Depends(page_params)]
