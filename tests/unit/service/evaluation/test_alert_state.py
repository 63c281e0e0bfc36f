"""The alert state machine: pending for `hold`, firing once, repeating, resolving once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sustain.service.evaluation.alert_state import Alert, AlertState, step

T0 = datetime(2026, 12, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)


def run(conditions: list[bool], hold: timedelta = 2 * MIN,
        repeat: timedelta | None = None) -> list[tuple[AlertState, str | None]]:
    alert = Alert()
    out = []
    for i, condition in enumerate(conditions):
        result = step(alert, condition, T0 + i * MIN, hold, repeat)
        alert = result.alert
        out.append((alert.state, result.notify))
    return out


def test_an_alert_fires_after_the_hold_and_resolves_once() -> None:
    assert run([True, True, True, True, False, False]) == [
        (AlertState.PENDING, None), (AlertState.PENDING, None),
        (AlertState.FIRING, "firing"), (AlertState.FIRING, None),
        (AlertState.RESOLVED, "resolved"), (AlertState.RESOLVED, None)]


def test_a_blip_shorter_than_the_hold_never_notifies() -> None:
    assert [n for _, n in run([True, False, True, False, False])] == [None] * 5
    assert run([True, False])[-1][0] is AlertState.INACTIVE


def test_a_firing_alert_repeats_at_the_interval() -> None:
    notes = [n for _, n in run([True] * 8, hold=timedelta(0), repeat=3 * MIN)]
    assert notes == ["firing", None, None, "repeat", None, None, "repeat", None]


def test_a_resolved_alert_that_returns_waits_the_hold_again() -> None:
    states = run([True, False, True, True], hold=timedelta(0))
    assert states == [(AlertState.FIRING, "firing"), (AlertState.RESOLVED, "resolved"),
                      (AlertState.FIRING, "firing"), (AlertState.FIRING, None)]
