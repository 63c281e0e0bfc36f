"""The pages' templates (service/web/templates/), loaded once, and the markup helpers
they share."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape


@cache
def templates() -> Jinja2Templates:
    """Loaded on the first request, then kept (compiled templates are cached inside)."""
    return Jinja2Templates(directory=Path(__file__).parent / "templates")


def with_code(text: str) -> Markup:
    """Plain text, escaped, with its `backquoted` commands set as <code>."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))
