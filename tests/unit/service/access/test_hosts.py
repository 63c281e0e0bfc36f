"""SUSTAIN_ALLOWED_HOSTS parsed into the patterns TrustedHostMiddleware checks, and the Host
names anonymous reads answer: loopback names, or those the setting lists."""

from __future__ import annotations

import pytest

from sustain.service.access.hosts import anonymous_host, host_name, parse_allowed_hosts


def test_allowed_hosts_are_lower_cased_names_globs_and_addresses() -> None:
    assert parse_allowed_hosts("") == ()
    assert parse_allowed_hosts(" , ") == ()
    assert parse_allowed_hosts("Sustain.Example, *.svc.cluster.local,10.0.0.7,[::1],*") == (
        "sustain.example", "*.svc.cluster.local", "10.0.0.7", "[::1]", "*")


@pytest.mark.parametrize("bad", ["evil example", "*evil.example", "sustain.*", "a..b",
                                 "host:8000", "::1", "*.", "-a.example", "http://a.example"])
def test_allowed_hosts_refuse_what_no_host_header_could_match(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a host name"):
        parse_allowed_hosts(f"sustain.example,{bad}")


# --- which Host names anonymous reads answer (DNS rebinding) ---

@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "LOCALHOST:8000", "127.0.0.1",
                                  "127.0.0.1:8000", "127.9.9.9:1", "[::1]", "[::1]:8000"])
def test_anonymous_reads_answer_a_loopback_host_with_or_without_a_port(host: str) -> None:
    assert anonymous_host(host, ())


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example",
                                  "127.0.0.1.nip.io", "0.0.0.0:8000", "10.0.0.7", "::1",
                                  "localhost:abc", "localhost:8000:1", "", "[::1]x"])
def test_anonymous_reads_refuse_any_other_host(host: str) -> None:
    assert not anonymous_host(host, ())
    assert not anonymous_host(host, ("*",))  # `*` lists nothing


def test_anonymous_reads_answer_only_the_hosts_allowed_hosts_lists() -> None:
    listed = parse_allowed_hosts("status.example, *.svc.local")
    assert anonymous_host("status.example:443", listed)
    assert anonymous_host("sustain.svc.local", listed)
    assert not anonymous_host("localhost", listed)
    assert not anonymous_host("evil.example", listed)


@pytest.mark.parametrize(("header", "name"), [
    ("Example.COM:80", "example.com"), ("[::1]:8000", "[::1]"), ("10.0.0.7", "10.0.0.7"),
    ("a b", None), ("x:", None), (":80", None), ("[::1", None)])
def test_the_name_a_host_header_holds(header: str, name: str | None) -> None:
    assert host_name(header) == name
