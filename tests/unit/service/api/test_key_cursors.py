"""Keyset cursors (several columns, or text): round trips, and anything else is a 422
naming `query.cursor`."""

from __future__ import annotations

import pytest

from sustain.service.api import cursor
from sustain.service.errors import FieldError


def test_a_key_cursor_round_trips() -> None:
    made = cursor.encode_key("alerts", ("Sustain:SloBurn", "ab12"))
    assert cursor.decode_key("alerts", made, (str, str)) == ("Sustain:SloBurn", "ab12")
    assert cursor.decode_key("alerts", None, (str, str)) is None
    at = cursor.encode_key("events", (1_700_000_000_000_000, 3))
    assert cursor.decode_key("events", at, (int, int)) == (1_700_000_000_000_000, 3)


@pytest.mark.parametrize("bad", [
    cursor.encode_key("other", ("a", "b")),
    cursor.encode_key("alerts", ("a",)),
    cursor.encode_key("alerts", ("a", 1)),
    cursor.encode_key("alerts", (1, 2)),
    cursor.encode("alerts", 5),
    "bm90IGpzb24",
    "%%%",
])
def test_anything_but_a_key_cursor_of_the_kind_and_shape_is_refused(bad: str) -> None:
    with pytest.raises(FieldError) as refused:
        cursor.decode_key("alerts", bad, (str, str))
    assert refused.value.field == "query.cursor"


def test_integers_beyond_64_bits_are_refused() -> None:
    with pytest.raises(FieldError):
        cursor.decode_key("events", cursor.encode_key("events", (2**63, 1)), (int, int))
