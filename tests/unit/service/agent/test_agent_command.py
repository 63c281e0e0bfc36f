"""`sustain agent` refuses to send its key in clear beyond loopback."""

from __future__ import annotations

import pytest

from sustain.service.access.keys import Role, allows
from sustain.service.cli.agent import plain_http_problem


@pytest.mark.parametrize(("server", "allowed", "refused"), [
    ("https://sustain.example.com", False, False),
    ("http://127.0.0.1:8000", False, False),
    ("http://[::1]:8000", False, False),
    ("http://localhost:8000", False, False),
    ("http://sustain.example.com", False, True),
    ("http://10.0.0.5:8000", False, True),
    ("http://10.0.0.5:8000", True, False),
    ("ftp://sustain.example.com", True, True),
    ("sustain.example.com", False, True),
])
def test_plain_http_is_refused_beyond_loopback_unless_allowed(
        server: str, allowed: bool, refused: bool) -> None:
    assert (plain_http_problem(server, allowed) is not None) == refused


def test_the_agent_role_stands_apart_from_the_others() -> None:
    assert allows(Role.agent, Role.agent)
    for other in (Role.viewer, Role.editor, Role.admin):
        assert not allows(Role.agent, other)
        assert not allows(other, Role.agent)
    assert allows(Role.admin, Role.viewer)
