"""docker-compose.yml: valid against the Compose specification's schema; every service's
ports, dependencies, health checks and mounted files as docs/deploy.md says; the Prometheus and
Alertmanager configs it mounts pass their own checkers; the SLO rules it loads are current."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.processes import sustain_command
from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
SUSTAIN_CONFIG = ROOT / "deploy" / "compose" / "sustain.yaml"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "sustain-slos.yml"


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)


def test_compose_file_is_valid_against_the_compose_spec_schema() -> None:
    checker = require_tool("check-jsonschema", "the `check-jsonschema` wheel in the test extra")
    result = run(checker, "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_services_ports_and_dependencies() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "sustain", "sustain-west", "sustain-agent",
                             "simulator", "prometheus", "alertmanager", "grafana"}
    ports = {name: [p.rsplit(":", 2)[-2] for p in s.get("ports", [])]
             for name, s in services.items()}
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert all(p.startswith("127.0.0.1:") for p in published), "a local stack stays local"
    assert ports == {"postgres": [], "sustain": ["8000"], "sustain-west": [],
                     "sustain-agent": [], "simulator": ["8001"],
                     "prometheus": ["9090"], "alertmanager": ["9093"], "grafana": ["3000"]}
    assert services["sustain"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "simulator": {"condition": "service_healthy"}}
    assert services["prometheus"]["depends_on"]["sustain"] == {"condition": "service_healthy"}
    assert "prometheus" in services["grafana"]["depends_on"]
    for name in ("postgres", "simulator"):
        assert services[name]["healthcheck"]["test"], f"{name} has a health check"
    assert services["postgres"]["image"].startswith("postgres:")
    assert "postgres-data:/var/lib/postgresql/data" in services["postgres"]["volumes"]
    assert "postgres-data" in compose()["volumes"]
    command = services["sustain"]["command"][0]
    assert command.index("sustain migrate") < command.index("sustain serve")
    url = services["sustain"]["environment"]["SUSTAIN_DATABASE_URL"]
    assert url.startswith("postgresql://")
    assert "@postgres:5432/" in url
    west = services["sustain-west"]
    assert west["environment"]["SUSTAIN_LOCATION"] == "west"
    assert west["environment"]["SUSTAIN_DATABASE_URL"] == url
    assert west["depends_on"] == {"sustain": {"condition": "service_healthy"}}, \
        "it starts once the first replica has migrated the schema"
    agent = services["sustain-agent"]
    assert agent["profiles"] == ["agent"], "started only when asked (it needs a key)"
    assert "SUSTAIN_DATABASE_URL" not in agent["environment"], "an agent has no database"
    config = yaml.safe_load(SUSTAIN_CONFIG.read_text())
    assert any("west" in probe.get("locations", []) for probe in config["probes"])


def test_every_mounted_file_exists_and_the_sustain_config_validates() -> None:
    for service in compose()["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), source
    result = run(*sustain_command(), "validate", str(SUSTAIN_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_and_alertmanager_configs_pass_their_checkers() -> None:
    promtool = require_tool("promtool", "Debian package `prometheus`")
    result = run(promtool, "check", "config", str(ROOT / "deploy/prometheus/prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    targets = [t for job in scrape["scrape_configs"] for c in job["static_configs"]
               for t in c["targets"]]
    assert "sustain:8000" in targets
    amtool = require_tool("amtool", "Debian package `prometheus-alertmanager`")
    result = run(amtool, "check-config", str(ROOT / "deploy/alertmanager/alertmanager.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_slo_rules_prometheus_loads_are_what_sustain_rules_prints_now() -> None:
    result = run(*sustain_command(), "rules", "--config", str(SUSTAIN_CONFIG))
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(RULES.read_text()) == yaml.safe_load(result.stdout), \
        "regenerate: sustain rules --config deploy/compose/sustain.yaml"
