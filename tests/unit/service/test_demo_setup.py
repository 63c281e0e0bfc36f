"""The demo's set-up, pure parts: the simulators' ports stay the same from one start to the
next (or the endpoints that pointed at a simulator that had to move follow it), and the banner
gives a person everything to go on: the pages, a `sustain probe` line to paste, the database URL
for the other commands while the demo holds the data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from sustain.service.demo.objects import demo_banner, moved_url
from sustain.service.demo.simulators import (
    PORTS_FILE,
    SimulatorPortError,
    choose_ports,
    remembered_ports,
)


def test_a_first_start_puts_the_simulators_beside_the_service_port() -> None:
    chosen, moved = choose_ports(None, {}, 8000, {8001: True, 8002: True})
    assert chosen == {"constant": 8001, "capacity": 8002}
    assert moved == []


def test_a_restart_keeps_the_remembered_ports() -> None:
    chosen, moved = choose_ports(None, {"constant": 9100, "capacity": 9200}, 8000,
                                 {9100: True, 9200: True, 8001: True, 8002: True})
    assert chosen == {"constant": 9100, "capacity": 9200}
    assert moved == []


def test_a_remembered_port_that_is_taken_is_moved() -> None:
    chosen, moved = choose_ports(None, {"constant": 9100, "capacity": 9200}, 8000,
                                 {9100: False, 9200: True})
    assert chosen == {"capacity": 9200}
    assert moved == ["constant"]


def test_an_asked_for_port_that_is_taken_is_refused_naming_the_flag() -> None:
    with pytest.raises(SimulatorPortError, match=r"--simulator-port.*9301"):
        choose_ports(9300, {}, 8000, {9300: True, 9301: False})
    assert choose_ports(9300, {}, 8000, {9300: True, 9301: True})[0] == {
        "constant": 9300, "capacity": 9301}


def test_remembered_ports_ignore_a_damaged_file(tmp_path: Path) -> None:
    assert remembered_ports(tmp_path) == {}
    (tmp_path / PORTS_FILE).write_text("{not json", encoding="utf-8")
    assert remembered_ports(tmp_path) == {}
    (tmp_path / PORTS_FILE).write_text('{"constant": 9100, "capacity": 70000, "x": 1}',
                                       encoding="utf-8")
    assert remembered_ports(tmp_path) == {"constant": 9100}


def test_an_endpoint_follows_its_simulator_only_on_the_same_origin() -> None:
    moved = {"http://127.0.0.1:9100": "http://127.0.0.1:9555"}
    assert moved_url("http://127.0.0.1:9100/v1", moved) == "http://127.0.0.1:9555/v1"
    assert moved_url("http://127.0.0.1:9100", moved) == "http://127.0.0.1:9555"
    assert moved_url("http://127.0.0.1:91000/v1", moved) is None
    assert moved_url("http://example.com/v1", moved) is None


def test_the_banner_gives_a_probe_line_and_the_database_url() -> None:
    text = demo_banner("http://127.0.0.1:8000", "http://127.0.0.1:8001/v1",
                       "http://127.0.0.1:8002/v1", "postgresql://postgres@/postgres?host=%2Fd",
                       "sk_sustain_x", [])
    assert "sustain probe http://127.0.0.1:8001/v1 --model sim-model --profile constant" in text
    assert "export SUSTAIN_DATABASE_URL='postgresql://postgres@/postgres?host=%2Fd'" in text
    assert "http://127.0.0.1:8000/runs/latest" in text
    assert "sk_sustain_x" in text
    own = demo_banner("http://127.0.0.1:8000", "a", "b", None, None, ["mine"])
    assert "SUSTAIN_DATABASE_URL=" not in own, "a configured database is the user's own"
    assert "Endpoint 'mine'" in own
