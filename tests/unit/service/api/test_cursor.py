"""Opaque cursors round-trip, and foreign or tampered ones name the cursor parameter."""

from __future__ import annotations

import pytest

from sustain.service.api import cursor
from sustain.service.errors import FieldError


def test_a_cursor_round_trips() -> None:
    assert cursor.decode("samples", cursor.encode("samples", 41)) == 41
    assert cursor.decode("samples", None) is None


@pytest.mark.parametrize("text", ["", "!!!", "bm9wZQ", cursor.encode("runs", 5)])
def test_a_foreign_cursor_is_a_field_error(text: str) -> None:
    with pytest.raises(FieldError) as error:
        cursor.decode("samples", text)
    assert error.value.field == "query.cursor"
