"""Secret references (`env:NAME`, `file:/path`): read when needed, never stored or echoed."""

from __future__ import annotations

import os
import re
from pathlib import Path

SECRET_REF_PATTERN = r"^(env:[A-Za-z_][A-Za-z0-9_]*|file:/\S+)$"
_SECRET_REF = re.compile(SECRET_REF_PATTERN)


class SecretUnavailableError(Exception):
    """The reference could not be resolved. The message names the reference, never a value."""


def _checked(ref: str, value: str) -> str:
    """The value, stripped; refused when it holds CR, LF, NUL or another control character,
    which would inject or break request headers once it is sent as a bearer token."""
    value = value.strip()
    if any(ch < " " or ch == "\x7f" for ch in value):
        raise SecretUnavailableError(
            f"secret reference {ref}: the value holds control characters (CR, LF, NUL, ...); "
            "not sent, not echoed")
    return value


def resolve_secret(ref: str) -> str:
    """Return the secret named by `ref`, stripped of surrounding whitespace; a value with
    control characters is refused (SecretUnavailableError naming only the reference)."""
    if not _SECRET_REF.match(ref):
        raise SecretUnavailableError(
            "malformed secret reference (not echoed): use env:NAME or file:/path"
        )
    kind, _, name = ref.partition(":")
    if kind == "env":
        value = os.environ.get(name)
        if value is None:
            raise SecretUnavailableError(f"secret reference {ref}: environment variable not set")
        return _checked(ref, value)
    try:
        return _checked(ref, Path(name).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SecretUnavailableError(
            f"secret reference {ref}: cannot read file ({exc.strerror})"
        ) from None
