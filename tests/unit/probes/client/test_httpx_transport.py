"""httpx failures become error classes (shared by OpenAI requests over httpx and `http` checks)."""

from __future__ import annotations

import socket

import httpx

from sustain.probes.client.httpx_transport import classify_transport_error
from sustain.probes.measure.sample import ErrorClass


def test_name_resolution_failures_are_classified_dns() -> None:
    """A DNS failure cannot be produced on loopback without leaving the machine, so the real
    exception chain httpx raises is built here."""
    cause = socket.gaierror(-2, "Name or service not known")
    error = httpx.ConnectError("[Errno -2] Name or service not known")
    error.__cause__ = cause
    assert classify_transport_error(error, response_started=False) is ErrorClass.DNS
    assert classify_transport_error(httpx.ConnectTimeout("t"), response_started=False) \
        is ErrorClass.TIMEOUT_CONNECT
    assert classify_transport_error(httpx.RemoteProtocolError("x"), response_started=True) \
        is ErrorClass.TRUNCATED
