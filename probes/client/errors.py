"""Mapping transport exceptions to error classes, so failures are values, not raises."""

from __future__ import annotations

import socket
import ssl

import httpx

from sustain.probes.measure.sample import ErrorClass


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify_transport_error(exc: httpx.HTTPError, *, response_started: bool) -> ErrorClass:
    """Error class of an httpx failure; after the response began, a broken stream is truncated."""
    if isinstance(exc, httpx.ConnectTimeout):
        return ErrorClass.TIMEOUT_CONNECT
    if isinstance(exc, httpx.TimeoutException):
        return ErrorClass.TIMEOUT_TOTAL
    causes = _causes(exc)
    if any(isinstance(c, socket.gaierror) for c in causes):
        return ErrorClass.DNS
    if any(isinstance(c, ssl.SSLError) for c in causes):
        return ErrorClass.TLS
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "name or service not known" in text or "nodename nor servname" in text:
            return ErrorClass.DNS
        if "ssl" in text or "certificate" in text:
            return ErrorClass.TLS
        return ErrorClass.CONNECT
    if response_started:
        return ErrorClass.TRUNCATED
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.DecodingError)):
        return ErrorClass.PROTOCOL
    return ErrorClass.CONNECT
