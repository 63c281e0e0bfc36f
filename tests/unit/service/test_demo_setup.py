"""The demo's set-up, pure parts: the simulators' ports stay the same from one start to the
next (or the endpoints that pointed at a simulator that had to move follow it), and the banner
gives a person everything to go on: the pages, what its simulators are set to (their true TTFT
and ITL, to hold sustain's figures against) and a `sustain probe` line to paste, the database
URL for the other commands while the demo holds the data directory. The simulators are started
with flags that mean the config the banner states."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperGroup

from sustain.service.cli import app
from sustain.service.demo.objects import DEMO_MODEL, DEMO_SIMULATOR, demo_banner, moved_url
from sustain.service.demo.simulators import (
    PORTS_FILE,
    SimulatorPortError,
    choose_ports,
    remembered_ports,
    simulate_args,
)
from sustain.simulator.config import SimulatorConfig


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
                       "sk_sustain_x", [], simulator=DEMO_SIMULATOR)
    assert "sustain probe http://127.0.0.1:8001/v1 --model sim-model --profile constant" in text
    assert "export SUSTAIN_DATABASE_URL='postgresql://postgres@/postgres?host=%2Fd'" in text
    assert "http://127.0.0.1:8000/runs/latest" in text
    assert "sk_sustain_x" in text
    own = demo_banner("http://127.0.0.1:8000", "a", "b", None, None, ["mine"],
                      simulator=DEMO_SIMULATOR)
    assert "SUSTAIN_DATABASE_URL=" not in own, "a configured database is the user's own"
    assert "Endpoint 'mine'" in own


def test_the_banner_states_the_latency_its_simulators_are_set_to() -> None:
    slow = SimulatorConfig(ttft_ms=120.0, itl_ms=7.5, max_batch=4, strict_model=True)
    text = demo_banner("http://127.0.0.1:8000", "http://127.0.0.1:8001/v1",
                       "http://127.0.0.1:8002/v1", None, None, [], simulator=slow)
    assert "The simulators serve model 'sim-model', set to TTFT 120 ms, ITL 7.5 ms: " \
        "compare what sustain measures with that." in text
    assert "another --model gets the 404 vLLM answers" in text
    assert "(4 generations at once each)" in text
    jittered = dataclasses.replace(slow, ttft_sigma=0.3, prefill_ms_per_token=0.5)
    assert "set to TTFT 120 ms + 0.5 ms per uncached prompt token (median), ITL 7.5 ms:" in \
        demo_banner("b", "c", "k", None, None, [], simulator=jittered)
    demo = demo_banner("b", "c", "k", None, None, [], simulator=DEMO_SIMULATOR)
    assert f"set to TTFT {DEMO_SIMULATOR.ttft_ms:g} ms, ITL {DEMO_SIMULATOR.itl_ms:g} ms:" in demo


def simulate_config(args: list[str]) -> SimulatorConfig:
    """The SimulatorConfig `sustain simulate ARGS` would serve, read by the command's own
    options (nothing is started)."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    simulate = group.commands["simulate"]
    params = simulate.make_context("simulate", list(args)).params
    own = {"host", "port", "api_key_env"}
    return SimulatorConfig(**{k: v for k, v in params.items() if k not in own})


def test_the_demo_starts_its_simulators_as_the_banner_says_strict_about_the_model() -> None:
    assert simulate_config(simulate_args(DEMO_SIMULATOR)) == DEMO_SIMULATOR
    assert DEMO_SIMULATOR.strict_model
    assert DEMO_SIMULATOR.model == DEMO_MODEL, "the demo's endpoints name what it serves"
    other = SimulatorConfig(ttft_ms=80.0, itl_ms=3.0, ttft_sigma=0.2, model="m2",
                            max_batch=None, strict_model=False)
    assert simulate_config(simulate_args(other)) == other
