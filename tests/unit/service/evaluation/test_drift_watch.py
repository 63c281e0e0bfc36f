"""The drift_metrics setting: metric:stat pairs, read in order; a bad pair is named; the
settings validate it without importing the alerting layer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sustain.service.evaluation.drift_watch import parse_watched


def test_watched_pairs_are_read_in_order_and_blank_items_skipped() -> None:
    assert parse_watched(" ttft:p99, e2e:p50 ,,itl:max ") == [
        ("ttft", "p99"), ("e2e", "p50"), ("itl", "max")]
    assert parse_watched("") == []


@pytest.mark.parametrize("item", ["vibes:p99", "ttft:p42", "ttft", "ttft:availability"])
def test_a_pair_that_is_not_a_latency_metric_and_statistic_is_named(item: str) -> None:
    with pytest.raises(ValueError, match=f"'{item}' is not metric:stat"):
        parse_watched(f"ttft:p99,{item}")


def test_the_settings_validate_drift_metrics_without_importing_the_alerting_layer() -> None:
    code = ("import sys\n"
            "from sustain.service.config import Settings\n"
            "Settings(drift_metrics='ttft:p99,e2e:p99')\n"
            "assert not [m for m in sys.modules if m.startswith('sustain.service.alerting')], "
            "sorted(m for m in sys.modules if m.startswith('sustain.service.alerting'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
