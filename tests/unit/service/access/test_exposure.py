"""Anonymous reads beyond loopback: refused unless SUSTAIN_ANONYMOUS_READ=true says so."""

from __future__ import annotations

import pytest

from sustain.service.access.exposure import (
    anonymous_read_explicit,
    anonymous_read_exposure,
    is_loopback,
)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost",
                                  "LOCALHOST", "::ffff:127.0.0.1"])
def test_loopback_addresses_are_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.0.0.5", "example.com",
                                  "localhost.example.com", "::ffff:10.0.0.1"])
def test_other_addresses_are_reachable_from_other_machines(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(("value", "explicit"), [
    ("true", True), ("TRUE", True), (" True ", True),
    ("1", False), ("yes", False), ("on", False), ("", False)])
def test_only_the_word_true_makes_anonymous_reads_explicit(value: str, explicit: bool) -> None:
    assert anonymous_read_explicit({"SUSTAIN_ANONYMOUS_READ": value}) is explicit


def test_anonymous_reads_on_the_network_are_refused_unless_explicit() -> None:
    assert anonymous_read_exposure("0.0.0.0", anonymous_read=True, explicit=False) == "refused"
    assert anonymous_read_exposure("0.0.0.0", anonymous_read=True, explicit=True) == "network"
    assert anonymous_read_exposure("127.0.0.1", anonymous_read=True,
                                   explicit=False) == "loopback"
    assert anonymous_read_exposure("0.0.0.0", anonymous_read=False, explicit=False) == "off"
