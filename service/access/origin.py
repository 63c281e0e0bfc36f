"""Whether a form post came from another site (cross-site request forgery), from the headers
browsers add to every POST: `Sec-Fetch-Site` (every current browser) and `Origin`.

A client that sends neither is not a browser (curl, a script): it posts on its own behalf, so
no other site can have made it post, and it may proceed."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
ALLOWED_FETCH_SITES = frozenset({"same-origin", "none"})
"""`none`: the user started the request themselves (typed, bookmarked); `same-site` is refused
too, since a sibling subdomain is another party."""


def _host_port(netloc: str, scheme: str) -> tuple[str, int] | None:
    """(host, port) of `host[:port]`, the port defaulting to the scheme's; None if malformed."""
    try:
        parts = urlsplit(f"//{netloc}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme.lower(), 0)


def is_cross_site(fetch_site: str | None, origin: str | None, own: Iterable[str]) -> bool:
    """Whether a browser sent this request from a page of another origin.

    `own` are where this service is reached: the Host header's `host[:port]` (its port
    defaulting to the Origin's scheme's, since a proxy may have ended TLS in front of us) and
    SUSTAIN_EXTERNAL_URL (`scheme://host[:port]`). Sec-Fetch-Site decides when present; else
    Origin must name one of `own` by host and port (`null`, sent from sandboxed frames and
    local files, never does)."""
    if fetch_site is not None:
        return fetch_site.strip().lower() not in ALLOWED_FETCH_SITES
    if origin is None:
        return False
    sent = urlsplit(origin.strip())
    claimed = _host_port(sent.netloc, sent.scheme) if sent.scheme in DEFAULT_PORTS else None
    if claimed is None:
        return True
    for place in own:
        if "://" in place:
            ours = urlsplit(place)
            found = _host_port(ours.netloc, ours.scheme)
        else:
            found = _host_port(place, sent.scheme)
        if found == claimed:
            return False
    return True
