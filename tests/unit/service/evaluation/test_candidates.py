"""Endpoint-down, no-data and drift alerts fire on exactly their conditions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sustain.service.alerting.delivery import retry_delay
from sustain.service.evaluation.candidates import (
    DriftState,
    ProbeHealth,
    drift_candidates,
    endpoint_down_candidates,
    fingerprint,
    no_data_candidates,
)

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def health(recent: int, failed: int, last_run_ago_s: float | None,
           watched_ago_s: float = 3600) -> ProbeHealth:
    return ProbeHealth(1, "chat", 60, NOW - timedelta(seconds=watched_ago_s),
                       None if last_run_ago_s is None else NOW - timedelta(seconds=last_run_ago_s),
                       recent, failed)


def test_endpoint_down_needs_n_consecutive_failed_runs() -> None:
    assert endpoint_down_candidates([health(3, 3, 10)], 3)[0].condition
    assert not endpoint_down_candidates([health(3, 2, 10)], 3)[0].condition
    assert not endpoint_down_candidates([health(2, 2, 10)], 3)[0].condition, "too few runs"
    (down,) = endpoint_down_candidates([health(3, 3, 10)], 3)
    assert down.labels == {"alertname": "SustainEndpointDown", "probe": "chat",
                           "severity": "page"}


def test_no_data_after_three_intervals_without_a_run() -> None:
    assert not no_data_candidates([health(1, 0, 170)], NOW)[0].condition
    assert no_data_candidates([health(1, 0, 181)], NOW)[0].condition
    assert no_data_candidates([health(0, 0, None, watched_ago_s=200)], NOW)[0].condition
    assert not no_data_candidates([health(0, 0, None, watched_ago_s=100)], NOW)[0].condition, \
        "a probe scheduled just now has not missed anything yet"


def test_no_data_on_a_cron_schedule_counts_its_ticks_not_its_shortest_gap() -> None:
    friday_evening = datetime(2026, 12, 4, 18, tzinfo=UTC)  # a Friday
    office_hours = ProbeHealth(1, "chat", 300, friday_evening - timedelta(days=30),
                               friday_evening - timedelta(minutes=1), 1, 0,
                               cron="*/5 9-17 * * 1-5")
    sunday = friday_evening + timedelta(days=2)
    assert not no_data_candidates([office_hours], sunday)[0].condition, "no tick was due"
    monday = datetime(2026, 12, 7, 9, 16, tzinfo=UTC)
    assert no_data_candidates([office_hours], monday)[0].condition, "09:00, :05, :10 missed"


def test_drift_alert_fires_on_regressed_only() -> None:
    states = [DriftState("chat", "ttft", "p99", "regressed", 1.3),
              DriftState("chat", "e2e", "p99", "improved", 0.7),
              DriftState("embed", "ttft", "p99", "insufficient_data", None)]
    fired = [c.condition for c in drift_candidates(states)]
    assert fired == [True, False, False]
    assert "1.30x" in drift_candidates(states)[0].annotations["description"]


def test_fingerprint_is_stable_and_label_order_free() -> None:
    assert fingerprint({"a": "1", "b": "2"}) == fingerprint({"b": "2", "a": "1"})
    assert fingerprint({"a": "1"}) != fingerprint({"a": "2"})


def test_retry_delay_doubles_to_its_cap() -> None:
    assert [retry_delay(n, 5, 60) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
