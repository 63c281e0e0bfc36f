"""`docker compose down -v` leaves nothing of the stack behind: no container, network or
volume labelled with its project."""

from __future__ import annotations

from tests.live.stack import ComposeStack


def test_down_with_volumes_leaves_nothing_running(stack: ComposeStack) -> None:
    assert stack.leftovers()["containers"], "the stack should be up before it is taken down"
    stack.down()
    assert stack.leftovers() == {"containers": [], "networks": [], "volumes": []}
