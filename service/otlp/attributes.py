"""The OpenTelemetry attributes every metric point and span of a run's requests carries: the
GenAI semantic conventions' (the operation and provider from the endpoint's API kind, the
model, the server's address and port) and sustain's own (the probe, the location measured
from). No OpenTelemetry import here."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from sustain.probes.client.target import Target
from sustain.probes.protocols.registry import protocol_for

DEFAULT_PORTS = {"https": 443, "http": 80}
"""`server.port` of a base URL that names none, by scheme."""

AttributeValue = str | int
Attributes = tuple[tuple[str, AttributeValue], ...]
"""Attribute pairs in a fixed order: hashable, so one set keys one series."""


@dataclass(frozen=True, slots=True)
class RunAttributes:
    """What is common to every request of one run."""

    operation: str
    """`gen_ai.operation.name`: the API kind's (probes/protocols, `otel_operation`)."""
    provider: str
    """`gen_ai.provider.name`: the API kind's (`otel_provider`)."""
    model: str
    """`gen_ai.request.model`: the endpoint's model, as its requests name it."""
    address: str | None
    """`server.address`: the host of the endpoint's base URL; None when it has none."""
    port: int | None
    """`server.port`: the base URL's port, or its scheme's default."""
    probe: str
    """`sustain.probe`: the probe's name."""
    location: str
    """`sustain.location`: where the run was measured from (the replica's or agent's)."""

    def pairs(self) -> Attributes:
        """The attributes, `server.address` and `server.port` left out where unknown."""
        pairs: list[tuple[str, AttributeValue]] = [
            ("gen_ai.operation.name", self.operation),
            ("gen_ai.provider.name", self.provider),
            ("gen_ai.request.model", self.model),
        ]
        if self.address is not None:
            pairs.append(("server.address", self.address))
            if self.port is not None:
                pairs.append(("server.port", self.port))
        pairs += [("sustain.probe", self.probe), ("sustain.location", self.location)]
        return tuple(pairs)


def server_of(base_url: str) -> tuple[str | None, int | None]:
    """The host (lower case, an IPv6 address without brackets) and port of `base_url`; the
    port is the scheme's default where the URL names none. Never the URL's user or password,
    path or query."""
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:  # an unparsable port
        return None, None
    if not host:
        return None, None
    return host, port if port is not None else DEFAULT_PORTS.get(parts.scheme.lower())


def run_attributes(target: Target, probe: str, location: str) -> RunAttributes | None:
    """The attributes of a run of `probe` against `target`, measured from `location`; None
    for an API kind whose requests are no GenAI operation (a plain HTTP check): those export
    nothing."""
    kind = protocol_for(target)
    if kind.otel_operation is None or kind.otel_provider is None:
        return None
    address, port = server_of(target.base_url)
    return RunAttributes(operation=kind.otel_operation, provider=kind.otel_provider,
                         model=target.model, address=address, port=port, probe=probe,
                         location=location)
