"""SUSTAIN_ALLOWED_HOSTS: the host names a request's Host header may name. Pure parsing; the
check itself is Starlette's TrustedHostMiddleware (sustain.service.web.hosts). And which Host
names anonymous reads (SUSTAIN_ANONYMOUS_READ) answer: loopback names, or the names listed."""

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


def host_name(header: str) -> str | None:
    """The name a Host header holds, lower-cased and without its port (an IPv6 address keeps
    its brackets, as patterns spell it), or None when it is not `name`, `name:port`,
    `[v6]` or `[v6]:port`."""
    header = header.strip().lower()
    if header.startswith("["):
        name, bracket, rest = header.partition("]")
        name += bracket
    elif header.count(":") <= 1:
        name, colon, port = header.partition(":")
        rest = colon + port
    else:
        return None  # a bare IPv6 address: not a Host header
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and len(rest) <= 6):
        return None
    return name if name and _is_name(name) else None


def is_loopback_name(name: str) -> bool:
    """Whether a Host name (host_name's) can only have come from this machine's own
    browser: `localhost`, 127.0.0.0/8 or [::1]. Another page's DNS name may resolve to
    127.0.0.1 (DNS rebinding), but its requests carry that name, not these."""
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether a Host name matches one of parse_allowed_hosts' patterns (as Starlette's
    TrustedHostMiddleware matches them: `*.suffix` any name under the suffix, `*` any)."""
    return any(p == "*" or name == p or (p.startswith("*.") and name.endswith(p[1:]))
               for p in patterns)


def anonymous_host(header: str, patterns: tuple[str, ...]) -> bool:
    """Whether a caller without a key may read under SUSTAIN_ANONYMOUS_READ given the
    request's Host header: when SUSTAIN_ALLOWED_HOSTS lists hosts (`patterns`, without `*`),
    one of those; otherwise a loopback name (is_loopback_name), with or without a port. So a
    page on another name that resolves to loopback reads nothing without a key."""
    name = host_name(header)
    if name is None:
        return False
    explicit = tuple(p for p in patterns if p != "*")
    if explicit and "*" not in patterns:
        return matches(name, explicit)
    return is_loopback_name(name)
