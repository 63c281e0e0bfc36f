"""External tools the tests drive: on PATH, or installed by a wheel next to this Python."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def find_tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def require_tool(name: str, source: str) -> str:
    """The tool's path, or a skip naming where it comes from (.ci/run installs them all)."""
    path = find_tool(name)
    if path is None:
        pytest.skip(f"{name} not installed ({source}; .ci/run installs it)")
    return path
