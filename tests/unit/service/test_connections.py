"""The open-connection cap: which connections are closed when a new one would exceed it, and
how the cap fits under the file limit."""

from __future__ import annotations

from sustain.service.config import Settings
from sustain.service.connections import (
    MIN_OPEN_CONNECTIONS,
    ConnectionRegistry,
    fd_reserve,
    open_connection_cap,
)


def test_a_new_connection_past_the_cap_closes_the_longest_idle_or_slow_one() -> None:
    registry: ConnectionRegistry[str] = ConnectionRegistry(3)
    assert registry.opened("a") == []
    assert registry.opened("b") == []
    assert registry.opened("c") == []
    assert registry.opened("d") == ["a"]
    assert len(registry) == 3
    assert "a" not in registry


def test_a_connection_being_answered_is_never_shed() -> None:
    registry: ConnectionRegistry[str] = ConnectionRegistry(2)
    registry.opened("busy")
    registry.busy("busy")
    registry.opened("slow")
    assert registry.opened("fresh") == ["slow"]
    assert "busy" in registry
    assert "fresh" in registry


def test_the_newcomer_is_shed_only_when_every_other_connection_is_busy() -> None:
    registry: ConnectionRegistry[str] = ConnectionRegistry(2)
    for name in ("x", "y"):
        registry.opened(name)
        registry.busy(name)
    assert registry.opened("z") == ["z"]
    assert len(registry) == 2


def test_a_connection_that_becomes_idle_again_goes_last_in_line() -> None:
    registry: ConnectionRegistry[str] = ConnectionRegistry(2)
    registry.opened("first")
    registry.opened("second")
    registry.busy("first")
    registry.sheddable("first")  # answered: idle from now on, newer than `second`
    assert registry.opened("third") == ["second"]


def test_a_closed_connection_stays_forgotten() -> None:
    registry: ConnectionRegistry[str] = ConnectionRegistry(2)
    registry.opened("gone")
    registry.closed("gone")
    registry.closed("gone")
    registry.sheddable("gone")
    registry.busy("gone")
    assert len(registry) == 0


def test_the_cap_stays_below_the_file_limit_less_the_reserve() -> None:
    assert open_connection_cap(2000, 1024, 200) == 824
    assert open_connection_cap(2000, 1_048_576, 200) == 2000
    assert open_connection_cap(2000, None, 200) == 2000
    assert open_connection_cap(2000, 100, 200) == MIN_OPEN_CONNECTIONS


def test_the_reserve_counts_the_database_pool_twice_and_in_process_measuring() -> None:
    workers = Settings(database_pool_size=10, measure_workers=2, http_max_connections=1000)
    in_process = Settings(database_pool_size=10, measure_workers=0, http_max_connections=1000)
    assert fd_reserve(in_process) - fd_reserve(workers) == 1000 - 2 * 4
    bigger_pool = Settings(database_pool_size=20, measure_workers=2, http_max_connections=1000)
    assert fd_reserve(bigger_pool) - fd_reserve(workers) == 20


def test_the_reserve_counts_the_api_pool_once() -> None:
    small = Settings(database_api_pool_size=10, measure_workers=2)
    bigger = Settings(database_api_pool_size=30, measure_workers=2)
    assert fd_reserve(bigger) - fd_reserve(small) == 20
