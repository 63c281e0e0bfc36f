"""The Helm chart rendered by real Helm templating (helm-python-sdk), for the chart tests and
the live deploy suite, which runs the rendered pod spec as a container."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (test extra) not installed")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "sustain"


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest `helm install sustain --namespace monitoring` would create."""
    chart = helm.Chart.load(CHART)
    chart.validate_schema(values)
    files = chart.render(values, name="sustain", namespace="monitoring", is_install=True)
    return [doc for path, text in sorted(files.items()) if not path.endswith("NOTES.txt")
            for doc in yaml.safe_load_all(text) if doc]


def by_kind(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in manifests}
