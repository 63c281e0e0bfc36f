"""Secret references (`env:NAME`, `file:/path`): read when needed, never stored or echoed, and
only where the operator's SecretPolicy (secret_policy.py) lets them point."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.local_files import FileRefusedError, read_capped

SECRET_REF_PATTERN = r"^(env:[A-Za-z_][A-Za-z0-9_]*|file:/\S+)$"
_SECRET_REF = re.compile(SECRET_REF_PATTERN)
MAX_SECRET_BYTES = 64 * 1024
"""A secret file larger than this is refused unread (keys and URLs are far smaller)."""


class SecretUnavailableError(Exception):
    """The reference could not be resolved. The message names the reference, never a value."""


class SecretRefusedError(SecretUnavailableError):
    """The policy does not let the reference be resolved; retrying cannot help until the
    operator changes SUSTAIN_SECRET_ENV or SUSTAIN_SECRET_DIR."""


def _checked(ref: str, value: str, policy: SecretPolicy) -> str:
    """The value, stripped; refused when it holds CR, LF, NUL or another control character,
    which would inject or break request headers once it is sent as a bearer token, or when it
    is one of sustain's own credentials."""
    value = value.strip()
    if any(ch < " " or ch == "\x7f" for ch in value):
        raise SecretUnavailableError(
            f"secret reference {ref}: the value holds control characters (CR, LF, NUL, ...); "
            "not sent, not echoed")
    if policy.holds_forbidden(value):
        raise SecretRefusedError(
            f"secret reference {ref}: refused, it holds one of sustain's own credentials")
    return value


def resolve_secret(ref: str, policy: SecretPolicy) -> str:
    """Return the secret named by `ref`, stripped of surrounding whitespace. Raises
    SecretRefusedError when `policy` does not allow the reference, SecretUnavailableError when
    it cannot be read or its value holds control characters; both name only the reference."""
    if not _SECRET_REF.match(ref):
        raise SecretUnavailableError(
            "malformed secret reference (not echoed): use env:NAME or file:/path"
        )
    reason = policy.check(ref, os.environ)
    if reason is not None:
        raise SecretRefusedError(f"secret reference {ref}: {reason}")
    kind, _, name = ref.partition(":")
    if kind == "env":
        value = os.environ.get(name)
        if value is None:
            raise SecretUnavailableError(f"secret reference {ref}: environment variable not set")
        return _checked(ref, value, policy)
    try:
        real = Path(name).resolve(strict=True)
        reason = policy.check(f"file:{real}")  # the links as they are now
        if reason is not None:
            raise SecretRefusedError(f"secret reference {ref}: {reason}")
        raw = read_capped(real, MAX_SECRET_BYTES)
        return _checked(ref, raw.decode("utf-8"), policy)
    except OSError as exc:
        raise SecretUnavailableError(
            f"secret reference {ref}: cannot read file ({exc.strerror})"
        ) from None
    except FileRefusedError as exc:
        raise SecretUnavailableError(f"secret reference {ref}: {exc}") from None
    except UnicodeDecodeError:
        raise SecretUnavailableError(f"secret reference {ref}: not UTF-8 text") from None
