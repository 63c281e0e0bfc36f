"""SUSTAIN_ALLOWED_HOSTS: the host names a request's Host header may name. Pure parsing; the
check itself is Starlette's TrustedHostMiddleware (sustain.service.web.hosts)."""

from __future__ import annotations

import ipaddress
import re

_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def _is_name(text: str) -> bool:
    """A DNS name (letters, digits, hyphens; dot-separated labels of at most 63 characters),
    or an IP address as a Host header holds it without its port (IPv6 in brackets)."""
    try:
        if text.startswith("[") and text.endswith("]"):
            return isinstance(ipaddress.ip_address(text[1:-1]), ipaddress.IPv6Address)
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        pass
    return len(text) <= 253 and all(_LABEL.fullmatch(label) for label in text.split("."))


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """Comma-separated names, `*.suffix` globs (any name under the suffix) or `*`, lower-cased;
    () when empty, which (like `*`) means any host. Ports are not part of a pattern: the check
    compares the Host header's name without its port. Raises ValueError naming the bad entry."""
    patterns = []
    for raw in text.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        name = entry[2:] if entry.startswith("*.") else entry
        if entry != "*" and ("*" in name or not _is_name(name)):
            raise ValueError(f"{raw.strip()!r} is not a host name, *.example.com or *")
        patterns.append(entry)
    return tuple(patterns)
