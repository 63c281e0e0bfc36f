"""Which hosts probes and notifiers may reach: the egress policy, a pure value.

Entries are CIDRs (`10.0.0.0/8`, `fd00::/8`, or a bare address) and host globs (`*.internal`,
fnmatch syntax, matched case-insensitively against the host name without a trailing dot).
Some targets are always denied, whatever the lists say: link-local addresses and the cloud
metadata services (below), which hand out credentials to whoever asks from inside the VM, so a
probe or notifier aimed at them would make sustain an oracle for them. Loopback and private
ranges stay allowed by default: sustain probes in-cluster services.

A host is judged twice: as written in a URL when an endpoint or notifier is created
(`check_host`: a name against the host globs, an address literal in every spelling a resolver
accepts), and again when a connection is opened, on every address the name resolved to
(`check_connection`), so DNS cannot lead around the lists. Nothing here does I/O.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALWAYS_DENIED_NETWORKS: tuple[tuple[str, str], ...] = (
    # Link-local (RFC 3927, RFC 4291). The instance metadata services of AWS, Google Cloud,
    # Azure, Oracle Cloud and DigitalOcean answer on 169.254.169.254.
    ("169.254.0.0/16", "link-local"),
    ("fe80::/10", "link-local"),
    # Alibaba Cloud's ECS metadata service (Alibaba Cloud "Instance metadata" docs; cloud-init's
    # AliYun datasource).
    ("100.100.100.200/32", "cloud metadata"),
    # AWS EC2 instance metadata over IPv6 on Nitro instances (the AWS SDKs' IPv6 IMDS endpoint).
    ("fd00:ec2::254/128", "cloud metadata"),
    # Google Cloud's metadata server over IPv6 (Compute Engine docs, "About VM metadata":
    # fd20:ce::254 on IPv6-enabled instances).
    ("fd20:ce::254/128", "cloud metadata"),
    # Azure's WireServer (the platform's guest agent endpoint, which hands out extension
    # settings and certificates to whoever asks from inside the VM).
    ("168.63.129.16/32", "cloud metadata"),
)
ALWAYS_DENIED_HOSTS: tuple[str, ...] = (
    # Google Cloud's metadata server (Compute Engine docs: http://metadata.google.internal/),
    # and its short name on GCE and App Engine flexible.
    "metadata.google.internal",
    "metadata",
    # The name EC2's resolver answers with the metadata address.
    "instance-data",
    "instance-data.ec2.internal",
)
NAT64_NETWORKS = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
"""NAT64 prefixes (RFC 6052, RFC 8215): the last 32 bits are an IPv4 address."""
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
"""Deprecated IPv4-compatible IPv6 addresses (::a.b.c.d)."""

_NUMERIC_IPV4 = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)(\.(0[xX][0-9a-fA-F]*|[0-9]+)){0,3}$")
"""The dotted forms inet_aton takes: 1 to 4 parts, each decimal, octal (0...) or hex (0x...)."""
_GLOB = re.compile(r"^[a-z0-9*?\[\]!._-]+$")


def host_name(host: str) -> str:
    """A URL host as compared: lower case, without brackets, a percent-encoded zone id decoded
    and one trailing dot removed (`Metadata.Google.Internal.` is `metadata.google.internal`)."""
    name = unquote(host.strip()).lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name[:-1] if name.endswith(".") else name


def address_of(host: str) -> IPAddress | None:
    """The address a URL host denotes when it is an address literal, in any spelling a
    resolver accepts: dotted quad, IPv6 (with or without brackets, IPv4-mapped), and the
    numeric IPv4 forms of inet_aton (`2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376`,
    `169.254.43518`); None for a host name."""
    name = host_name(host)
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if _NUMERIC_IPV4.match(name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    return None


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried inside an IPv6 one: IPv4-mapped (::ffff:a.b.c.d), NAT64,
    6to4 (2002::/16), Teredo and the deprecated IPv4-compatible form."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    low = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if any(address in network for network in NAT64_NETWORKS):
        found.append(low)
    if address in IPV4_COMPATIBLE and int(address) > 1:
        found.append(low)
    return found


def parse_targets(text: str) -> tuple[tuple[IPNetwork, ...], tuple[str, ...]]:
    """A comma-separated list of CIDRs and host globs, as networks and lower-case globs.
    ValueError names the entry that is neither."""
    networks: list[IPNetwork] = []
    globs: list[str] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        glob = host_name(entry)
        if "/" in entry or ":" in entry or not _GLOB.match(glob) or address_of(glob):
            raise ValueError(f"{entry!r} is neither a CIDR (10.0.0.0/8, fd00::/8) nor a host "
                             "glob (*.internal)")
        globs.append(glob)
    return tuple(networks), tuple(globs)


_ALWAYS_DENIED = tuple((ipaddress.ip_network(cidr), why) for cidr, why in ALWAYS_DENIED_NETWORKS)


def _canonical(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address as the IPv4 address it is; others as they are."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """Where connections may go. Empty `allowed_*`: anywhere not denied; otherwise only hosts
    matching an allowed glob, or addresses in an allowed network. Denied always wins."""

    allowed_networks: tuple[IPNetwork, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    denied_networks: tuple[IPNetwork, ...] = ()
    denied_hosts: tuple[str, ...] = ()
    body_checks_anywhere: bool = True
    """Whether an `http` check may compare a response body (`body_contains`) on any target it
    may reach: a library user's or a one-shot CLI run's own requests. The service's policy
    (`parse`) sets False: a body check is a one-bit oracle of what a target answers, so it
    is allowed only while an allow-list is in force, that is on the targets the operator
    listed."""

    @classmethod
    def parse(cls, allowed: str = "", denied: str = "", *,
              body_checks_anywhere: bool = False) -> EgressPolicy:
        """The service's policy, from the comma-separated lists (SUSTAIN_ALLOWED_TARGETS,
        SUSTAIN_DENIED_TARGETS); ValueError names a bad entry."""
        allowed_networks, allowed_hosts = parse_targets(allowed)
        denied_networks, denied_hosts = parse_targets(denied)
        return cls(allowed_networks, allowed_hosts, denied_networks, denied_hosts,
                   body_checks_anywhere)

    @property
    def restricted(self) -> bool:
        """Whether an allow-list is in force."""
        return bool(self.allowed_networks or self.allowed_hosts)

    def body_check_refusal(self) -> str | None:
        """Why an `http` check may not look for a text in a response body, or None. With an
        allow-list every connection goes to a listed target (a name matching a listed glob,
        or every address it resolves to in a listed network: check_connection), so a body
        check may run wherever the target itself may be reached."""
        if self.body_checks_anywhere or self.restricted:
            return None
        return ("body_contains is allowed only on targets listed in SUSTAIN_ALLOWED_TARGETS, "
                "which is empty (a body check tells its reader what the target answers)")

    def _denied_name(self, name: str) -> str | None:
        for glob in ALWAYS_DENIED_HOSTS:
            if fnmatch.fnmatchcase(name, glob):
                return f"{name} is a cloud metadata host (always denied)"
        for glob in self.denied_hosts:
            if fnmatch.fnmatchcase(name, glob):
                return f"{name} is denied ({glob})"
        return None

    def _allowed_name(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.allowed_hosts)

    def check_address(self, address: IPAddress, *, name_allowed: bool = False) -> str | None:
        """Why a connection to `address` is refused, or None. `name_allowed`: the host name
        it was resolved from matched an allowed glob (the allow-list is then satisfied)."""
        address = ipaddress.ip_address(str(address).partition("%")[0])
        for candidate in (address, *embedded_ipv4(address)):
            shown = str(address) if candidate == address else f"{address} ({candidate})"
            for network, why in _ALWAYS_DENIED:
                if candidate.version == network.version and candidate in network:
                    return f"{shown} is {why} (always denied)"
            for network in self.denied_networks:
                if candidate.version == network.version and candidate in network:
                    return f"{shown} is denied ({network})"
        if not self.restricted or name_allowed:
            return None
        plain = _canonical(address)
        if any(plain.version == network.version and plain in network
               for network in self.allowed_networks):
            return None
        return f"{address} is not among the allowed targets"

    def check_host(self, host: str) -> str | None:
        """Why a URL naming `host` is refused, as far as can be told without resolving it, or
        None. A name that no allowed glob matches passes while allowed networks exist: its
        addresses are judged at connect time."""
        address = address_of(host)
        if address is not None:
            return self.check_address(address)
        name = host_name(host)
        denied = self._denied_name(name)
        if denied is not None:
            return denied
        if not self.restricted or self._allowed_name(name) or self.allowed_networks:
            return None
        return f"{name} is not among the allowed targets"

    def check_url(self, url: str) -> str | None:
        """check_host of the URL's host; a URL without one is refused."""
        try:
            host = urlsplit(url).hostname
        except ValueError:
            host = None
        if not host:
            return "the URL has no host"
        return self.check_host(host)

    def check_connection(self, host: str, addresses: Iterable[IPAddress]) -> str | None:
        """Why connecting to `host`, which resolved to `addresses`, is refused, or None. Every
        address must pass: a name that resolves to one denied address is refused whole."""
        literal = address_of(host)
        name_allowed = False
        if literal is None:
            name = host_name(host)
            denied = self._denied_name(name)
            if denied is not None:
                return denied
            name_allowed = self._allowed_name(name)
        for address in addresses:
            reason = self.check_address(address, name_allowed=name_allowed)
            if reason is not None:
                return reason if literal is not None else f"{host_name(host)}: {reason}"
        return None
