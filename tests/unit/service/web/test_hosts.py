"""Redirect locations made path-only: a Location built from the Host header a client sent
never points a browser at that host."""

from __future__ import annotations

import pytest

from sustain.service.web.hosts import path_only


@pytest.mark.parametrize(("location", "expected"), [
    ("http://evil.example/api/v1/endpoints?limit=5", "/api/v1/endpoints?limit=5"),
    ("https://EVIL.example/docs#top", "/docs#top"),
    ("http://evil.example", "/"),
    ("http://evil.example?x=1", "/?x=1"),
    ("/login", "/login"),
])
def test_a_redirect_to_this_host_becomes_its_path(location: str, expected: str) -> None:
    assert path_only(location, "evil.example") == expected


@pytest.mark.parametrize("location", ["http://evil.example//other.example/x",
                                      "http://evil.example/\\other.example/x",
                                      "http://evil.example///other.example"])
def test_a_path_never_reads_as_a_scheme_relative_url(location: str) -> None:
    path = path_only(location, "evil.example")
    assert path.startswith("/")
    assert not path.startswith(("//", "/\\"))


def test_a_redirect_elsewhere_is_left_as_it_is() -> None:
    assert path_only("https://idp.example/authorize", "sustain.example") == \
        "https://idp.example/authorize"
