"""`sustain probe --json` prints strict JSON (no NaN, no Infinity: what `jq` and every strict
parser accept) for every mode of the simulator, faults and pathological streams alike, and
writes its HTML report; streams read at once report a TPOT of 0, not a division by it.

The command runs in this process (typer's runner), against a simulator on a thread whose
`hang` fault lets go after 1 s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sustain.service.cli import app
from sustain.simulator.config import Fault, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

REQUESTS = 40
"""Enough completed requests (32) for a steady-state judgement of the stage."""


@pytest.fixture(scope="module")
def simulator() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=20, itl_ms=2, output_tokens=16,
                                             hang_s=1.0)) as server:
        yield server


def _refuse_constant(token: str) -> Any:
    raise AssertionError(f"not strict JSON: {token}")


def probe_json(base_url: str, mode: Fault, html: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, [
        "probe", base_url, "--model", "m", "--profile", "concurrency", "--concurrency", "8",
        "--max-requests", str(REQUESTS), "--output-tokens", "16",
        "--header", f"x-sim-fault:{mode.value}", "--slo-ttft-ms", "500",
        "--price-per-hour", "7.5", "--power-kw", "1.4", "--json", "--html", str(html)])
    assert result.exit_code in (0, 1), f"{mode}: exit {result.exit_code}\n{result.output}"
    report: dict[str, Any] = json.loads(result.stdout, parse_constant=_refuse_constant)
    return report


@pytest.mark.parametrize("mode", list(Fault))
def test_probe_json_is_strict_json_for_every_simulator_mode(
        simulator: BackgroundSimulator, mode: Fault, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    report = probe_json(simulator.base_url, mode, html)
    assert report["requests"] == REQUESTS
    assert html.stat().st_size > 0


@pytest.mark.parametrize("mode", [Fault.ONE_WRITE, Fault.INSTANT])
def test_a_stream_read_at_once_reports_zero_tpot(simulator: BackgroundSimulator, mode: Fault,
                                                 tmp_path: Path) -> None:
    report = probe_json(simulator.base_url, mode, tmp_path / "report.html")
    assert report["successes"] == REQUESTS
    assert report["tpot_ms"]["p90"] == 0.0
