from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from probes.load.profiles import ConstantProfile, LoadProfile, SingleProfile
from probes.load.schedule import arrival_offsets


def test_single_profile_sends_one_request_at_once() -> None:
    assert list(arrival_offsets(SingleProfile())) == [0.0]


def test_constant_profile_spaces_requests_by_one_over_rate() -> None:
    offsets = list(arrival_offsets(ConstantProfile(rate=2.0, duration_s=5.0)))
    assert offsets == [k * 0.5 for k in range(10)]


def test_constant_profile_stops_at_max_requests() -> None:
    profile = ConstantProfile(rate=100.0, duration_s=60.0, max_requests=7)
    assert len(list(arrival_offsets(profile))) == 7


def test_profiles_are_chosen_by_kind_and_validated() -> None:
    adapter = TypeAdapter[LoadProfile](LoadProfile)
    assert isinstance(adapter.validate_python({"kind": "single"}), SingleProfile)
    with pytest.raises(ValidationError, match="rate"):
        adapter.validate_python({"kind": "constant", "rate": 0, "duration_s": 5})
    with pytest.raises(ValidationError):
        adapter.validate_python({"kind": "bursty"})
