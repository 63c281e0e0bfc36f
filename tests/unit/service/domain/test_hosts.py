"""SUSTAIN_ALLOWED_HOSTS parsed into the patterns TrustedHostMiddleware checks."""

from __future__ import annotations

import pytest

from sustain.service.domain.hosts import parse_allowed_hosts


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
