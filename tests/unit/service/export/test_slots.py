"""Export slots: per caller and in all, given back exactly once."""

from __future__ import annotations

import pytest

from sustain.service.export.slots import ExportSlots


def test_a_caller_past_its_share_or_anyone_past_the_total_gets_no_slot() -> None:
    slots = ExportSlots(per_caller=2, total=3)
    assert slots.take("a")
    assert slots.take("a")
    assert not slots.take("a")
    assert slots.take("b")
    assert not slots.take("c")  # the total is reached
    assert slots.in_flight == 3
    slots.give_back("a")
    assert slots.take("c")
    assert (slots.held_by("a"), slots.held_by("b"), slots.held_by("c")) == (1, 1, 1)


def test_a_slot_not_taken_cannot_be_given_back() -> None:
    slots = ExportSlots(per_caller=1, total=1)
    with pytest.raises(ValueError, match="holds no export slot"):
        slots.give_back("a")
    assert slots.in_flight == 0
