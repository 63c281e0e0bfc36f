"""Whether a bind address is reachable from other machines, and whether the service may let
callers without a key read there.

Anonymous reads (SUSTAIN_ANONYMOUS_READ) show every endpoint, probe, run and alert to whoever
can connect. On loopback that is this machine's users (`sustain demo`); on any other address
it is the network, so `serve` starts there only when the variable is spelled out as `true`
(not merely truthy, e.g. `1` or `yes` left over from a local setup), and then with a warning.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Literal

ANONYMOUS_READ_VAR = "SUSTAIN_ANONYMOUS_READ"

AnonymousReadExposure = Literal["off", "loopback", "network", "refused"]
"""off: reads need a key; loopback: anonymous reads, this machine only; network: anonymous
reads for the network, explicitly asked for (warn); refused: the same, not explicit."""


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine: `localhost`,
    127.0.0.0/8, ::1 (bracketed or not) and IPv4-mapped loopback. An empty host, 0.0.0.0,
    :: and any name other than localhost are not."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def anonymous_read_explicit(environ: Mapping[str, str]) -> bool:
    """Whether SUSTAIN_ANONYMOUS_READ is set to exactly `true` (any case)."""
    return environ.get(ANONYMOUS_READ_VAR, "").strip().lower() == "true"


def anonymous_read_exposure(host: str, anonymous_read: bool, explicit: bool
                            ) -> AnonymousReadExposure:
    """What serving anonymous reads on `host` amounts to (see AnonymousReadExposure)."""
    if not anonymous_read:
        return "off"
    if is_loopback(host):
        return "loopback"
    return "network" if explicit else "refused"
