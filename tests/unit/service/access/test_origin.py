"""Telling a sign-in form posted from another site from this service's own, by the headers a
browser adds (Sec-Fetch-Site, else Origin); a client sending neither is no browser."""

from __future__ import annotations

import pytest

from sustain.service.access.origin import is_cross_site

OWN = ["status.example.com", "https://status.example.com"]


@pytest.mark.parametrize(("fetch_site", "origin", "cross"), [
    ("same-origin", "https://status.example.com", False),
    ("none", None, False),
    ("cross-site", "https://evil.example", True),
    ("same-site", "https://other.example.com", True),
    ("cross-site", "https://status.example.com", True),  # Sec-Fetch-Site is not forgeable
    ("Same-Origin ", None, False),
    ("bogus", None, True),
])
def test_sec_fetch_site_decides_when_present(fetch_site: str, origin: str | None,
                                             cross: bool) -> None:
    assert is_cross_site(fetch_site, origin, OWN) is cross


@pytest.mark.parametrize(("origin", "own", "cross"), [
    ("https://status.example.com", ["status.example.com"], False),
    ("https://status.example.com:443", ["status.example.com"], False),
    ("http://127.0.0.1:8080", ["127.0.0.1:8080"], False),
    ("http://[::1]:8080", ["[::1]:8080"], False),
    ("https://STATUS.example.com", ["status.example.com"], False),
    # TLS ended at a proxy: the Host header carries no port, the Origin says https
    ("https://status.example.com", ["status.example.com", ""], False),
    ("https://status.example.com", ["internal:8080", "https://status.example.com/"], False),
    ("https://evil.example", ["status.example.com"], True),
    ("https://status.example.com.evil.example", ["status.example.com"], True),
    ("http://127.0.0.1:8081", ["127.0.0.1:8080"], True),
    ("http://status.example.com", ["internal:8080", "https://status.example.com"], True),
    ("null", ["status.example.com"], True),
    ("file://", ["status.example.com"], True),
    ("https://status.example.com:99999", ["status.example.com"], True),
    ("https://", [""], True),
])
def test_without_sec_fetch_site_the_origin_must_name_this_service(
        origin: str, own: list[str], cross: bool) -> None:
    assert is_cross_site(None, origin, own) is cross


def test_a_client_sending_neither_header_is_not_a_browser_and_may_post() -> None:
    assert is_cross_site(None, None, OWN) is False
