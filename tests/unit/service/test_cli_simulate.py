"""`sustain simulate`'s options are the simulator's settings, declared once in SimulatorConfig:
every setting with an Option is a flag with that setting's default and help, and a value out of
the setting's range is exit status 2 naming the flag as typed."""

from __future__ import annotations

import dataclasses

import pytest
import typer.main
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from sustain.service.cli import app
from sustain.service.cli.flags import config_option
from sustain.simulator.config import SimulatorConfig, SimulatorConfigError, options


def simulate_options() -> dict[str, TyperOption]:
    """The simulate command's options, by parameter name, as typer holds them."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return {param.name: param for param in group.commands["simulate"].params
            if isinstance(param, TyperOption) and param.name is not None}


def test_every_flagged_setting_is_an_option_with_the_settings_default_and_help() -> None:
    found = simulate_options()
    defaults = {f.name: f.default for f in dataclasses.fields(SimulatorConfig)}
    assert len(options()) >= 20
    for name, option in options().items():
        assert name in found, name
        param = found[name]
        assert param.help == option.help
        assert param.default == defaults[name]


def test_the_bind_address_and_the_key_variable_are_the_commands_own() -> None:
    assert {"host", "port", "api_key_env"} <= set(simulate_options())
    assert "api_key" not in simulate_options(), "the key itself is never a flag"


def test_a_setting_out_of_its_range_is_exit_2_naming_each_flag() -> None:
    result = CliRunner().invoke(app, ["simulate", "--fault-rate", "2", "--gpus", "0",
                                      "--prompt-chars-per-token", "0"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2
    assert "--fault-rate: must be <= 1" in output
    assert "--gpus: must be >= 1" in output
    assert "--prompt-chars-per-token: must be > 0" in output
    assert "fault_rate" not in output


def test_the_prefix_cache_setting_is_turned_off_by_its_negative_flag() -> None:
    option = options()["prefix_cache"]
    assert config_option("prefix_cache", option) == "--prefix-cache"
    assert "--no-prefix-cache" in simulate_options()["prefix_cache"].secondary_opts


@pytest.mark.parametrize(("settings", "problem"), [
    ({"max_batch": 0}, ("max_batch", "must be >= 1")),
    ({"embedding_dimensions": 65_537}, ("embedding_dimensions", "must be <= 65536")),
    ({"gpu_power_w": 0.0}, ("gpu_power_w", "must be > 0")),
    ({"ttft_ms": -1.0}, ("ttft_ms", "must be >= 0")),
])
def test_a_config_out_of_range_cannot_be_made(settings: dict[str, object],
                                              problem: tuple[str, str]) -> None:
    with pytest.raises(SimulatorConfigError) as raised:
        SimulatorConfig(**settings)  # type: ignore[arg-type]
    assert raised.value.problems == [problem]


def test_unset_optional_settings_are_in_range() -> None:
    config = SimulatorConfig(max_batch=None, gpu_power_w=None, prompt_chars_per_token=None)
    assert config.max_batch is None
