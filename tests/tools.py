"""External tools the tests drive: on PATH, or installed by a wheel next to this Python."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


def find_tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def require_tool(name: str, source: str, env: str | None = None) -> str:
    """The tool's path (`env`, when given and set, names it), or a skip naming where it comes
    from (.ci/run installs them all)."""
    path = os.environ.get(env) if env else None
    path = path or find_tool(name)
    if path is None:
        pytest.skip(f"{name} not installed ({source}; .ci/run installs it)")
    return path
