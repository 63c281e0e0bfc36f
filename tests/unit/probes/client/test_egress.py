"""The egress policy: link-local and cloud metadata targets are refused in every spelling a
resolver accepts; loopback and private ranges stay reachable; operators narrow or widen the
denial with CIDRs and host globs; resolved addresses are judged one by one."""

from __future__ import annotations

import ipaddress

import pytest

from sustain.probes.client.egress import EgressPolicy, address_of, parse_targets

DEFAULT = EgressPolicy()

METADATA_SPELLINGS = [
    "169.254.169.254",
    "169.254.0.1",
    "2852039166",  # 169.254.169.254 as one decimal number
    "0xa9fea9fe",  # ... as one hex number
    "0xA9FEA9FE",
    "0251.0376.0251.0376",  # ... in octal parts
    "0xa9.0xfe.0xa9.0xfe",
    "169.254.43518",  # ... with the last two parts as one 16-bit number
    "169.16689662",  # ... with the last three as one 24-bit number
    "169.254.169.254.",  # a trailing dot
    "[::ffff:a9fe:a9fe]",  # IPv4-mapped IPv6, hex
    "::ffff:a9fe:a9fe",
    "[::ffff:169.254.169.254]",  # IPv4-mapped IPv6, dotted
    "[0:0:0:0:0:ffff:a9fe:a9fe]",
    "[64:ff9b::a9fe:a9fe]",  # NAT64
    "[2002:a9fe:a9fe::1]",  # 6to4
    "[::a9fe:a9fe]",  # IPv4-compatible (deprecated)
    "[fe80::1]",  # IPv6 link-local
    "[fe80::1%25eth0]",  # with a zone id, as a URL spells it
    "[FE80::abcd]",
    "100.100.100.200",  # Alibaba Cloud metadata
    "[fd00:ec2::254]",  # AWS metadata over IPv6
    "metadata.google.internal",
    "METADATA.GOOGLE.INTERNAL",
    "metadata.google.internal.",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
]


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_metadata_and_link_local_hosts_are_denied_by_default(host: str) -> None:
    reason = DEFAULT.check_host(host)
    assert reason is not None
    assert "always denied" in reason


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_an_allow_list_cannot_reopen_metadata_hosts(host: str) -> None:
    wide = EgressPolicy.parse(allowed="0.0.0.0/0,::/0,*")
    assert wide.check_host(host) is not None


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0xa9fea9fe/v1",
    "http://[::ffff:a9fe:a9fe]:80/", "https://metadata.google.internal/computeMetadata/v1/",
    "http://user@169.254.169.254/"])
def test_a_url_is_judged_by_its_host(url: str) -> None:
    assert DEFAULT.check_url(url) is not None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "10.1.2.3", "172.16.0.9",
                                  "192.168.1.1", "fd12:3456::1", "vllm.inference.svc",
                                  "api.openai.com", "8.8.8.8", "metadata-proxy.internal",
                                  "169.254.169.254.example.com"])
def test_loopback_private_and_public_hosts_stay_reachable_by_default(host: str) -> None:
    assert DEFAULT.check_host(host) is None


def test_numeric_spellings_are_read_as_inet_aton_reads_them() -> None:
    expected = ipaddress.ip_address("169.254.169.254")
    for spelling in ("2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "169.254.43518"):
        assert address_of(spelling) == expected
    assert address_of("1.2.3.4.5") is None
    assert address_of("cafe.example") is None
    assert address_of("999.1.1.1") is None


def test_denied_targets_add_networks_and_host_globs() -> None:
    policy = EgressPolicy.parse(denied="127.0.0.0/8, *.corp.example , fd00::/8")
    assert policy.check_host("127.0.0.2") == "127.0.0.2 is denied (127.0.0.0/8)"
    assert policy.check_host("[::ffff:127.0.0.1]") is not None
    assert policy.check_host("Build.Corp.Example.") == "build.corp.example is denied " \
        "(*.corp.example)"
    assert policy.check_host("[fd12::1]") is not None
    assert policy.check_host("10.0.0.1") is None
    assert policy.check_host("localhost") is None  # a name: judged when it is resolved


def test_allowed_targets_let_only_matching_hosts_and_addresses_through() -> None:
    policy = EgressPolicy.parse(allowed="10.0.0.0/8,*.inference.svc")
    assert policy.check_host("10.4.5.6") is None
    assert policy.check_host("[::ffff:10.4.5.6]") is None
    assert policy.check_host("vllm.inference.svc") is None
    assert policy.check_host("192.168.1.1") == "192.168.1.1 is not among the allowed targets"
    # a name no glob matches may still resolve into 10.0.0.0/8: judged at connect time
    assert policy.check_host("example.com") is None
    assert policy.check_connection("example.com", [ipaddress.ip_address("8.8.8.8")]) == \
        "example.com: 8.8.8.8 is not among the allowed targets"
    assert policy.check_connection("example.com", [ipaddress.ip_address("10.0.0.8")]) is None


def test_with_only_host_globs_allowed_other_names_are_refused_at_once() -> None:
    policy = EgressPolicy.parse(allowed="*.inference.svc")
    assert policy.check_host("vllm.inference.svc") is None
    assert policy.check_host("example.com") == "example.com is not among the allowed targets"
    assert policy.check_host("10.0.0.1") == "10.0.0.1 is not among the allowed targets"


def test_a_resolved_address_is_judged_even_when_the_name_looked_harmless() -> None:
    addresses = [ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("169.254.169.254")]
    reason = DEFAULT.check_connection("rebind.example", addresses)
    assert reason == "rebind.example: 169.254.169.254 is link-local (always denied)"
    allowed_name = EgressPolicy.parse(allowed="*.example")
    assert allowed_name.check_connection("rebind.example", addresses) is not None
    assert allowed_name.check_connection("ok.example", addresses[:1]) is None
    mapped = [ipaddress.ip_address("::ffff:169.254.169.254")]
    assert DEFAULT.check_connection("v6.example", mapped) is not None


def test_a_denied_name_is_refused_whatever_it_resolves_to() -> None:
    assert DEFAULT.check_connection("metadata.google.internal.",
                                    [ipaddress.ip_address("10.0.0.1")]) is not None


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "http://x", "a b", "*.x/8", "1.2.3.4.5/8",
                                   "2852039166"])
def test_a_bad_entry_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match="neither a CIDR") as caught:
        parse_targets(f"10.0.0.0/8,{entry}")
    assert repr(entry) in str(caught.value)


def test_empty_entries_are_ignored() -> None:
    assert parse_targets(" , ,") == ((), ())
