"""A PATCH of an SLO's `locations` replaces them whole: a field the body leaves out takes its
default (it was a KeyError, a 500, when the body gave only one of them)."""

from __future__ import annotations

import pytest

from sustain.service.db.slos import columns
from sustain.service.schemas.slos import SloUpdate


@pytest.mark.parametrize(("given", "mode", "min_locations"), [
    ({}, "across", 1), ({"mode": "each"}, "each", 1), ({"min_locations": 3}, "across", 3),
    ({"mode": "each", "min_locations": 2}, "each", 2)])
def test_a_patch_of_locations_sets_both_columns(given: dict[str, object], mode: str,
                                                min_locations: int) -> None:
    changes = columns(SloUpdate.model_validate({"locations": given}), partial=True)
    assert changes == {"locations_mode": mode, "min_locations": min_locations}


def test_a_patch_without_locations_leaves_them() -> None:
    changes = columns(SloUpdate.model_validate({"objective": 0.9}), partial=True)
    assert changes == {"objective": 0.9}
