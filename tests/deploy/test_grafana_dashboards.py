"""Grafana dashboards: the five docs/deploy.md names, each panel's PromQL accepted by promtool, and
every metric they name either exported by sustain's /metrics or recorded by the rules the
compose Prometheus loads. Provisioning points Grafana at them and at that Prometheus."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from sustain.service.app import create_app
from tests.integration.service.helpers import app_settings, serving
from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"
RULES = ROOT / "deploy" / "prometheus" / "rules"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
METRIC = re.compile(r"\b(sustain_[A-Za-z0-9_:]+)")
LABEL_VALUES = re.compile(r"^label_values\((.*),\s*([A-Za-z_]+)\)$")


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every variable query."""
    out = []
    for name, board in dashboards().items():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append((f"{name}: {panel['title']} {target['refId']}", target["expr"]))
        for variable in board["templating"]["list"]:
            match = LABEL_VALUES.match(variable["query"]["query"])
            assert match, f"{name}: variable {variable['name']} is label_values(...)"
            out.append((f"{name}: ${variable['name']}", match.group(1)))
    return out


def as_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return re.sub(r"\$[A-Za-z_]+", ".*", expr)


def test_the_five_dashboards_with_unique_ids_and_the_endpoint_variable() -> None:
    boards = dashboards()
    assert set(boards) == {"sustain-overview", "sustain-endpoint", "sustain-slos",
                           "sustain-drift", "sustain-capacity"}
    for name, board in boards.items():
        assert board["uid"] == name
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))
        assert all(p["datasource"]["uid"] == "prometheus" for p in board["panels"])
    variables = [v["name"] for v in boards["sustain-endpoint"]["templating"]["list"]]
    assert variables == ["endpoint", "probe"]
    overview = " ".join(e for w, e in expressions() if w.startswith("sustain-overview"))
    for needed in ("histogram_quantile(0.99", "histogram_quantile(0.5", "sustain_ttft_seconds",
                   "sustain_tpot_seconds", "sustain_e2e_seconds", "sustain_output_tokens_total",
                   "error_class", "sustain_ticks_skipped_total"):
        assert needed in overview, needed


def test_every_expression_parses(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "Debian package `prometheus`")
    rules = [{"record": f"dashboard:expr_{i}", "expr": as_promql(expr)}
             for i, (_, expr) in enumerate(expressions())]
    (tmp_path / "dashboards.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "dashboards", "rules": rules}]}))
    check = subprocess.run([promtool, "check", "rules", str(tmp_path / "dashboards.yml")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def exported(metrics_text: str) -> set[str]:
    names = set()
    for line in metrics_text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            if kind == "counter" and not name.endswith("_total"):
                names.add(f"{name}_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


async def test_every_metric_named_is_exported_or_recorded(database_url: str) -> None:
    app = create_app(app_settings(database_url, auto_migrate=False))
    async with serving(app) as api:
        names = exported((await api.get("/metrics")).text)
    recorded = {rule["record"] for path in RULES.glob("*.yml")
                for group in yaml.safe_load(path.read_text())["groups"]
                for rule in group["rules"] if "record" in rule}
    missing = {(where, metric) for where, expr in expressions()
               for metric in METRIC.findall(expr) if metric not in names | recorded}
    assert missing == set()


def test_provisioning_points_at_the_dashboards_and_prometheus() -> None:
    source = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    (datasource,) = source["datasources"]
    assert (datasource["uid"], datasource["url"]) == ("prometheus", "http://prometheus:9090")
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "sustain.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in mounts


REPLICATED = re.compile(r"sustain_(slo_|alerts|probe_last_run_|drift_ratio)")


def test_figures_every_replica_exports_alike_are_never_summed() -> None:
    """Database-backed gauges and sustain_slo_events_total are the same on every replica, so a
    sum would count them once per replica."""
    for where, expr in expressions():
        if REPLICATED.search(expr):
            assert "sum" not in expr, where
