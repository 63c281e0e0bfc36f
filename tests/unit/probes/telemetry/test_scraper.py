"""An exposition's own sample timestamps time its values (so a counter's rate does not depend
on how late each answer travelled), where its clock agrees with ours; without them, or with a
clock far off, a scrape is timed by its answer's arrival."""

from __future__ import annotations

from sustain.probes.telemetry.scraper import MAX_STAMP_SKEW_S, parse_exposition, values_time

EXPOSITION = """\
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 300.5 1764929000123
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b"} 310 1764929000125
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting 3
"""


def test_the_latest_sample_timestamp_is_read_with_the_values() -> None:
    samples, stamped = parse_exposition(EXPOSITION, gpus=("1",))
    assert samples == [("DCGM_FI_DEV_POWER_USAGE", 310.0), ("vllm:num_requests_waiting", 3.0)]
    assert stamped == 1764929000.125
    assert parse_exposition("up 1\n") == ([("up", 1.0)], None)


def test_a_scrape_is_timed_by_the_exporter_where_its_clock_agrees() -> None:
    arrived = 1764929000.180
    assert values_time(arrived, 1764929000.125) == 1764929000.125
    assert values_time(arrived, None) == arrived
    assert values_time(arrived, arrived - MAX_STAMP_SKEW_S - 1) == arrived
