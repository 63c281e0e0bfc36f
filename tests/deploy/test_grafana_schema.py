"""Dashboards against what Grafana accepts, with Grafana's own types and models (no Grafana
server can run here): each dashboard, as a TypeScript literal, type-checks under `tsc --strict`
against @grafana/schema pinned to the Grafana release docker-compose.yml runs, with panel
options and field config typed per panel type (deploy/grafana/schema-check); and each round-trips
through the grafana-foundation-sdk models without losing a key. Planted faults (a bad enum, a
wrong type, unknown keys) show both checks fail when they should."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
SCHEMA_CHECK = ROOT / "deploy" / "grafana" / "schema-check"
ERROR = re.compile(r"^generated/(?P<file>[a-z0-9_]+)\.ts\(\d+,\d+\): error (?P<text>.*)$")


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The schema-check package installed from its lock file (npm ci) in a scratch folder."""
    npm = require_tool("npm", "Node.js's npm, Debian package npm")
    folder = tmp_path_factory.mktemp("schema-check")
    for name in ("package.json", "package-lock.json", "tsconfig.json", "dashboard-types.ts"):
        shutil.copy(SCHEMA_CHECK / name, folder / name)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"npm ci failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return folder


def typecheck(folder: Path, boards: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """tsc's errors per dashboard (an empty list: it type-checks)."""
    generated = folder / "generated"
    shutil.rmtree(generated, ignore_errors=True)
    generated.mkdir()
    names = {name: re.sub(r"[^a-z0-9]", "_", name) for name in boards}
    for name, board in boards.items():
        (generated / f"{names[name]}.ts").write_text(
            'import type { SustainDashboard } from "../dashboard-types.js";\n\n'
            f"export const dashboard: SustainDashboard = {json.dumps(board, indent=2)};\n")
    done = subprocess.run([str(folder / "node_modules" / ".bin" / "tsc"), "-p", "tsconfig.json"],
                          cwd=folder, capture_output=True, text=True, timeout=300, check=False)
    errors: dict[str, list[str]] = {name: [] for name in boards}
    by_file = {v: k for k, v in names.items()}
    for line in done.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            errors[by_file[match["file"]]].append(match["text"])
        elif line.startswith(("dashboard-types.ts", "error")):
            raise AssertionError(f"the schema check itself does not compile: {done.stdout}")
    assert done.returncode == 0 or any(errors.values()), done.stdout + done.stderr
    return errors


def test_every_dashboard_type_checks_against_grafana_schema(checker: Path) -> None:
    errors = typecheck(checker, dashboards())
    assert errors == {name: [] for name in dashboards()}


def _plant(board: dict[str, Any], fault: str) -> dict[str, Any]:
    planted = copy.deepcopy(board)
    panel = next(p for p in planted["panels"] if p["type"] == "timeseries")
    if fault == "bad enum":
        panel["fieldConfig"]["defaults"]["thresholds"] = {"mode": "relative", "steps": []}
    elif fault == "wrong type":
        panel["gridPos"]["h"] = "8"
    elif fault == "unknown panel key":
        panel["titel"] = "typo"
    elif fault == "unknown option":
        panel["options"] = {"legend": {"displayMode": "list", "placment": "bottom"}}
    elif fault == "unknown custom field config":
        panel["fieldConfig"]["defaults"]["custom"] = {"lineWidht": 2}
    elif fault == "unknown target key":
        panel["targets"][0]["exp"] = panel["targets"][0]["expr"]
    elif fault == "unknown panel type":
        panel["type"] = "graph"
    return planted


FAULTS = ["bad enum", "wrong type", "unknown panel key", "unknown option",
          "unknown custom field config", "unknown target key", "unknown panel type"]


def test_planted_faults_fail_the_type_check(checker: Path) -> None:
    board = dashboards()["sustain-endpoint"]
    errors = typecheck(checker, {fault: _plant(board, fault) for fault in FAULTS})
    assert [fault for fault in FAULTS if not errors[fault]] == []


def _lost(before: Any, after: Any, path: str = "") -> list[str]:
    """Paths of `before` that `after` does not hold with the same value."""
    if isinstance(before, dict):
        if not isinstance(after, dict):
            return [path or "/"]
        return [lost for key, value in before.items()
                for lost in ([f"{path}/{key}"] if key not in after
                             else _lost(value, after[key], f"{path}/{key}"))]
    if isinstance(before, list):
        if not isinstance(after, list) or len(before) != len(after):
            return [path]
        return [lost for i, (x, y) in enumerate(zip(before, after, strict=True))
                for lost in _lost(x, y, f"{path}/{i}")]
    return [] if before == after else [f"{path}: {before!r} became {after!r}"]


def round_trip(board: dict[str, Any]) -> list[str]:
    """What a dashboard loses through the foundation SDK's models (decode, then encode)."""
    register_default_plugins()
    again = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
    return _lost(board, again)


def test_every_dashboard_round_trips_through_the_foundation_sdk_without_losing_a_key() -> None:
    assert {name: round_trip(board) for name, board in dashboards().items()} == {
        name: [] for name in dashboards()}


def test_a_key_grafana_does_not_know_is_lost_in_the_round_trip() -> None:
    board = copy.deepcopy(dashboards()["sustain-overview"])
    variables = board["templating"]["list"]
    variables.append({"name": "x", "type": "query", "query": "up", "definition": "up"})
    board["panels"][0]["targets"][0]["exp"] = "up"
    assert sorted(round_trip(board)) == [
        "/panels/0/targets/0/exp", f"/templating/list/{len(variables) - 1}/definition"]
