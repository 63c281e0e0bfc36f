"""The storage benchmark's pure parts: table sizes grouped as docs/sizing.md reports them, and
the arithmetic that turns measured bytes per run, sample and rollup bucket into disk per day
and held under retention."""

from __future__ import annotations

import pytest

from benchmarks.sizing import (
    Fleet,
    Footprint,
    buckets_per_day,
    held,
    human,
    sizing_table,
    written_per_day,
)
from benchmarks.storage import OTHERS, by_group, by_table, growth

RUNS_ONLY = Footprint(run_bytes=1000.0, sample_bytes=0.0, bucket_bytes=0.0)
SAMPLES_ONLY = Footprint(run_bytes=0.0, sample_bytes=100.0, bucket_bytes=0.0)
BUCKETS_ONLY = Footprint(run_bytes=0.0, sample_bytes=0.0, bucket_bytes=5000.0)


def test_daily_sample_partitions_count_as_the_samples_table() -> None:
    tables = by_table([("samples_p20261205", "samples", 300), ("samples_p20261206", "samples",
                                                               200), ("runs", None, 70)])

    assert tables == {"samples": 500, "runs": 70}


def test_tables_outside_the_reported_ones_are_summed_as_others() -> None:
    groups = by_group({"runs": 10, "slo_run_counts": 4, "dead_letters": 3, "samples": 7})

    assert groups[OTHERS] == 7
    assert groups["runs"] == 10
    assert groups["samples"] == 7
    assert groups["rollups"] == 0


def test_growth_counts_a_table_absent_before_from_zero() -> None:
    assert growth({"runs": 100}, {"runs": 160, "samples": 40}) == {"runs": 60, "samples": 40}


def test_a_probe_fills_24_hourly_buckets_and_one_daily_one_at_any_interval_up_to_an_hour(
) -> None:
    assert buckets_per_day(15) == buckets_per_day(60) == buckets_per_day(3600) == 25
    assert buckets_per_day(7200) == 13
    assert buckets_per_day(2 * 86400) == 1


def test_runs_per_day_are_probes_times_locations_over_the_interval() -> None:
    assert Fleet(10, 3, 60).runs_per_day == 10 * 3 * 1440
    assert Fleet(10, 3, 15).runs_per_day == 4 * Fleet(10, 3, 60).runs_per_day


def test_per_run_bytes_scale_with_runs_and_bucket_bytes_do_not_follow_the_interval() -> None:
    fast, slow = Fleet(100, 2, 15), Fleet(100, 2, 300)

    assert written_per_day(RUNS_ONLY, fast) == 20 * written_per_day(RUNS_ONLY, slow)
    assert written_per_day(BUCKETS_ONLY, fast) == written_per_day(BUCKETS_ONLY, slow) \
        == 100 * 2 * 25 * 5000


def test_a_load_probe_writes_each_of_its_samples() -> None:
    one = written_per_day(SAMPLES_ONLY, Fleet(1, 1, 60))

    assert written_per_day(SAMPLES_ONLY, Fleet(1, 1, 60, samples_per_run=8000)) == 8000 * one


def test_runs_and_rollups_are_held_for_the_run_retention() -> None:
    fleet = Fleet(10, 1, 60)

    assert held(RUNS_ONLY, fleet, 90) == pytest.approx(90 * written_per_day(RUNS_ONLY, fleet))
    assert held(BUCKETS_ONLY, fleet, 30) == pytest.approx(
        30 * written_per_day(BUCKETS_ONLY, fleet))


def test_samples_are_held_for_their_own_retention_never_longer_than_their_runs() -> None:
    fleet = Fleet(10, 1, 60)
    per_day = written_per_day(SAMPLES_ONLY, fleet)

    assert held(SAMPLES_ONLY, fleet, 365, sample_retention_days=14) == pytest.approx(
        14 * per_day)
    assert held(SAMPLES_ONLY, fleet, 7, sample_retention_days=14) == pytest.approx(7 * per_day)


@pytest.mark.parametrize(("size", "words"), [
    (512, "512 B"), (1536, "1.5 KiB"), (12 * 2**30, "12 GiB"), (1.5 * 2**40, "1.5 TiB"),
    (2000 * 2**30, "2.0 TiB"),
])
def test_sizes_read_in_binary_units(size: float, words: str) -> None:
    assert human(size) == words


def test_the_sizing_table_has_a_row_per_fleet_and_a_column_per_retention() -> None:
    table = sizing_table(Footprint(10_000, 300, 8000), [Fleet(10, 1, 60), Fleet(1000, 3, 15)],
                         [30, 365])
    lines = table.splitlines()

    assert len(lines) == 4
    assert lines[0].count("held, runs kept") == 2
    assert lines[2].startswith("| 10 | 1 | 1 min | 14,400 |")
    assert lines[3].startswith("| 1,000 | 3 | 15 s | 17,280,000 |")
