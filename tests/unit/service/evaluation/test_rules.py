"""The Prometheus rules `sustain rules` prints: valid for promtool, and behaving like the
service's own burn-rate logic (tests/prometheus/slo_rules_test.yaml), zero traffic included."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sustain.service.evaluation.rules import SloRules, ratio_record, rules_document
from sustain.service.evaluation.tiers import DEFAULT_TIERS
from tests.processes import sustain_command

TEST_FILE = Path(__file__).resolve().parents[3] / "prometheus" / "slo_rules_test.yaml"
EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "sustain.yaml"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian package `prometheus`; .ci/run installs it)")
    return path


def test_one_group_per_slo_with_a_ratio_per_window_and_an_alert_per_enabled_tier() -> None:
    tiers = [*DEFAULT_TIERS[:3], DEFAULT_TIERS[3].model_copy(update={"enabled": False})]
    document = rules_document([SloRules("b", 0.999, tiers), SloRules("a", 0.99, DEFAULT_TIERS)])
    assert [g["name"] for g in document["groups"]] == ["sustain-slo-a", "sustain-slo-b"]
    b_rules = document["groups"][1]["rules"]
    records = [r["record"] for r in b_rules if "record" in r]
    assert records == [ratio_record(w) for w in (300, 1800, 3600, 7200, 21600, 86400)]
    alerts = [r for r in b_rules if "alert" in r]
    assert [a["labels"]["tier"] for a in alerts] == ["page_fast", "page_slow", "ticket_fast"]
    assert "> 0.0144 and" in alerts[0]["expr"]


def test_generated_rules_pass_promtool_and_its_unit_tests(tmp_path: Path) -> None:
    tool = promtool()
    rules = rules_document([SloRules("chat", 0.99, DEFAULT_TIERS),
                            SloRules("idle", 0.99, DEFAULT_TIERS)])
    (tmp_path / "slo_rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    shutil.copy(TEST_FILE, tmp_path / TEST_FILE.name)
    check = subprocess.run([tool, "check", "rules", str(tmp_path / "slo_rules.yaml")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([tool, "test", "rules", str(tmp_path / TEST_FILE.name)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert test.returncode == 0, test.stdout + test.stderr


def test_rules_of_the_example_config_pass_promtool(tmp_path: Path) -> None:
    tool = promtool()
    out = subprocess.run([*sustain_command(), "rules", "--config", str(EXAMPLE)],
                         capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ,
                              "SUSTAIN_CONFIG_ENV": "VLLM_URL,VLLM_MODEL,GATEWAY_URL"})
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["groups"]
    (tmp_path / "rules.yaml").write_text(out.stdout)
    check = subprocess.run([tool, "check", "rules", str(tmp_path / "rules.yaml")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_tier_hold_becomes_the_alerts_for_and_passes_promtool(tmp_path: Path) -> None:
    tool = promtool()
    held = DEFAULT_TIERS[0].model_copy(update={"for_s": 600})
    document = rules_document([SloRules("chat", 0.99, [held, DEFAULT_TIERS[1]])])
    alerts = [r for r in document["groups"][0]["rules"] if "alert" in r]
    assert alerts[0]["for"] == "600s"
    assert "for" not in alerts[1]
    (tmp_path / "held.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    check = subprocess.run([tool, "check", "rules", str(tmp_path / "held.yaml")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
