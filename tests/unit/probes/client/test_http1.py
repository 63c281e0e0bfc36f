"""Lean-transport failures become error classes by kind; a connection closed mid-response is a
truncated response, before the response a protocol error."""

from __future__ import annotations

from sustain.probes.client.http1 import classify_transport_error
from sustain.probes.client.http1_pool import TransportError
from sustain.probes.measure.sample import ErrorClass


def test_transport_failures_are_classified_by_kind() -> None:
    for kind, expected in [("connect", ErrorClass.CONNECT), ("dns", ErrorClass.DNS),
                           ("tls", ErrorClass.TLS),
                           ("timeout_connect", ErrorClass.TIMEOUT_CONNECT),
                           ("protocol", ErrorClass.PROTOCOL)]:
        for started in (False, True):
            error = TransportError(kind, "x")
            assert classify_transport_error(error, response_started=started) is expected


def test_a_closed_connection_is_truncation_once_the_response_began() -> None:
    closed = TransportError("closed", "connection lost")
    assert classify_transport_error(closed, response_started=True) is ErrorClass.TRUNCATED
    assert classify_transport_error(closed, response_started=False) is ErrorClass.PROTOCOL
