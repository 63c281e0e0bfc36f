"""The demo's simulators keep their ports across a quick restart, on real loopback sockets: a
port whose last connection the simulator closed first lingers in TIME_WAIT for a minute, and
the demo's port check must bind as the simulator's server will (SO_REUSEADDR), or it takes
that port for "in use" and moves the simulator (and the `sustain probe` line the banner gave
goes stale). A port another socket still listens on is moved all the same."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import psutil
import pytest

from sustain.service.demo.objects import DEMO_SIMULATOR
from sustain.service.demo.simulators import DemoSimulators
from tests.processes import free_port, wait_until

LOOPBACK = "127.0.0.1"


def listening(port: int) -> socket.socket:
    """A listener on `port` bound as uvicorn's asyncio server binds (SO_REUSEADDR)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen()
    return sock


def time_wait_on(port: int) -> bool:
    """Whether a TCP socket with local port `port` is in TIME_WAIT now."""
    return any(c.status == psutil.CONN_TIME_WAIT and c.laddr and c.laddr.port == port
               for c in psutil.net_connections(kind="tcp4"))


def leave_in_time_wait(port: int) -> None:
    """Serve one connection on `port` and close it from the server's side first, as the
    simulator does with an idle keep-alive connection or when it stops: its end of the
    connection, bound to `port`, goes to TIME_WAIT; then the listener goes away."""
    with listening(port) as listener:
        client = socket.create_connection((LOOPBACK, port), timeout=5)
        accepted, _ = listener.accept()
        with client:
            accepted.close()
            assert client.recv(1) == b"", "the server's FIN reached the client"
    wait_until(lambda: time_wait_on(port), 5)


def remembered(data_dir: Path) -> dict[str, int]:
    """Two ports free now, remembered in `data_dir` as a previous start of the demo leaves
    them (the ports a first start takes are the service's + 1 and + 2: choose_ports' own
    tests; here any two this test process was handed, which no other test uses)."""
    chosen = {"constant": free_port(), "capacity": free_port()}
    DemoSimulators(data_dir, free_port(), None, DEMO_SIMULATOR).remember(chosen)
    return chosen


def test_a_simulator_port_in_time_wait_is_chosen_again(tmp_path: Path) -> None:
    before = remembered(tmp_path)
    leave_in_time_wait(before["constant"])
    with socket.socket() as plain, pytest.raises(OSError, match="in use") as refused:
        plain.bind((LOOPBACK, before["constant"]))  # what the check used to do
    assert refused.value.errno == errno.EADDRINUSE, "TIME_WAIT looks like a port in use"

    again = DemoSimulators(tmp_path, free_port(), None, DEMO_SIMULATOR)
    assert again.choose() == before, "the same ports as the previous start"
    assert again.moved == {}, "nothing moved, so no endpoint is rewritten"
    with listening(before["constant"]):
        pass  # and the simulator's server can bind it indeed


def test_a_simulator_port_another_socket_listens_on_is_moved(tmp_path: Path) -> None:
    before = remembered(tmp_path)
    with listening(before["constant"]):
        again = DemoSimulators(tmp_path, free_port(), None, DEMO_SIMULATOR)
        moved = again.choose()
    assert moved["constant"] != before["constant"]
    assert moved["capacity"] == before["capacity"]
    assert again.moved == {f"http://{LOOPBACK}:{before['constant']}":
                           f"http://{LOOPBACK}:{moved['constant']}"}
