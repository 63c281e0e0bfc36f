"""The demo's two simulators, each in a process of its own, on ports that stay the same from
one start to the next.

Two, so that the capacity probe, which saturates its simulator on purpose, never queues the
constant probe's requests behind its own (one shared 8-slot simulator made the constant
probe's TTFT p99 jump from ~52 ms to ~400 ms whenever their runs overlapped). Processes, so
that neither simulator shares an interpreter (and its GIL) with the service or with the other.
The ports are remembered in the data directory, so an endpoint a user made against the demo's
simulator keeps working after a restart; when a remembered port is taken, the simulator moves
and the endpoints that pointed at its old address are moved with it (`moved`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from sustain.simulator.config import SimulatorConfig

logger = logging.getLogger(__name__)

PORTS_FILE = "demo-simulators.json"
"""In the data directory: {"constant": port, "capacity": port}."""
ROLES = ("constant", "capacity")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
PR_SET_PDEATHSIG = 1


class SimulatorPortError(RuntimeError):
    """A port asked for in so many words is taken."""


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the simulator's server could bind a TCP port on host now.

    The check binds as that server will (uvicorn's asyncio server sets SO_REUSEADDR): the
    connections of the previous start that the simulator closed first linger in TIME_WAIT on
    its port for a minute, which a plain bind takes for "in use", and the simulator would move
    on every quick restart. A port another socket listens on is still refused."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def any_free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel hands out now (ephemeral range)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def remembered_ports(data_dir: Path) -> dict[str, int]:
    """The ports of the previous start ({} when none, or the file is unreadable)."""
    try:
        found = json.loads((data_dir / PORTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {role: port for role, port in found.items()
            if role in ROLES and isinstance(port, int) and 1 <= port <= 65_535}


def choose_ports(wanted: int | None, remembered: dict[str, int], service_port: int,
                 free: dict[int, bool]) -> tuple[dict[str, int], list[str]]:
    """Ports for the two simulators (pure: `free` says which candidate ports are free now).

    `wanted` (the --simulator-port flag) puts the constant probe's simulator there and the
    capacity probe's on the next port, or fails; else each keeps its remembered port, or
    takes the service's port + 1 and + 2 on a first start. A port that is taken is listed
    in the second value as a role to be given any free port."""
    if wanted is not None:
        chosen = {"constant": wanted, "capacity": wanted + 1}
        busy = [str(port) for port in chosen.values() if not free.get(port, False)]
        if busy or chosen["capacity"] > 65_535:
            raise SimulatorPortError(
                f"--simulator-port: the demo's simulators need ports {wanted} and "
                f"{wanted + 1}; {', '.join(busy) or str(wanted + 1)} cannot be used")
        return chosen, []
    chosen, moved = {}, []
    for offset, role in enumerate(ROLES, start=1):
        port = remembered.get(role, service_port + offset)
        if free.get(port, False) and port not in chosen.values():
            chosen[role] = port
        else:
            moved.append(role)
    return chosen, moved


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the simulator gets SIGTERM when the demo process dies, even by SIGKILL."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def simulate_args(config: SimulatorConfig) -> list[str]:
    """`sustain simulate`'s flags for what the demo sets of `config`: its latency, its model,
    how many generations at once, and whether it refuses another model (as vLLM does). The
    banner states the same config, so what it says is what runs."""
    args = ["--ttft-ms", repr(config.ttft_ms), "--itl-ms", repr(config.itl_ms),
            "--ttft-sigma", repr(config.ttft_sigma), "--itl-sigma", repr(config.itl_sigma),
            "--prefill-ms-per-token", repr(config.prefill_ms_per_token),
            "--model", config.model]
    if config.max_batch is not None:
        args += ["--max-batch", str(config.max_batch)]
    return [*args, "--strict-model"] if config.strict_model else args


@dataclass
class RunningSimulator:
    role: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


class DemoSimulators:
    """Start both simulators (`with`), stop them by PID on the way out."""

    def __init__(self, data_dir: Path, service_port: int, wanted: int | None,
                 config: SimulatorConfig) -> None:
        """`config`: how each simulator behaves (objects.DEMO_SIMULATOR), given to its
        `sustain simulate` as flags (simulate_args)."""
        self.data_dir = data_dir
        self.service_port = service_port
        self.wanted = wanted
        self.config = config
        self.running: dict[str, RunningSimulator] = {}
        self.moved: dict[str, str] = {}
        """Old origin -> new origin (`http://127.0.0.1:PORT`), for each simulator that could
        not keep its remembered port."""

    def url(self, role: str) -> str:
        return self.running[role].base_url

    def start(self) -> DemoSimulators:
        """Both simulators up and answering, on the ports chosen; SimulatorPortError when the
        ports asked for cannot be used."""
        chosen = self.choose()
        try:
            for role in ROLES:
                self.running[role] = self._start(role, chosen[role])
            for simulator in self.running.values():
                self._wait_ready(simulator)
        except BaseException:
            self.stop()
            raise
        self.remember(chosen)
        return self

    def remember(self, chosen: dict[str, int]) -> None:
        """Keep this start's ports in the data directory for the next start."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / PORTS_FILE).write_text(json.dumps(chosen), encoding="utf-8")

    def choose(self) -> dict[str, int]:
        """This start's port for each simulator (choose_ports on what is free now), any free
        port for one that cannot keep its own, recorded in `moved`; SimulatorPortError when the
        ports asked for cannot be used."""
        remembered = remembered_ports(self.data_dir)
        candidates = {*remembered.values(), self.service_port + 1, self.service_port + 2}
        if self.wanted is not None:
            candidates |= {self.wanted, self.wanted + 1}
        free = {port: 1 <= port <= 65_535 and port_free(port) for port in candidates}
        chosen, moved = choose_ports(self.wanted, remembered, self.service_port, free)
        for role in moved:
            chosen[role] = any_free_port()
            if role in remembered:
                self.moved[f"http://127.0.0.1:{remembered[role]}"] = \
                    f"http://127.0.0.1:{chosen[role]}"
        return chosen

    def _start(self, role: str, port: int) -> RunningSimulator:
        log = (self.data_dir / f"demo-simulator-{role}.log").open("ab")
        with log:
            process = subprocess.Popen(
                [sys.executable, "-m", "sustain", "simulate", "--port", str(port),
                 *simulate_args(self.config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)
        return RunningSimulator(role, port, process)

    def _wait_ready(self, simulator: RunningSimulator) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if simulator.process.poll() is not None:
                raise RuntimeError(
                    f"the demo's {simulator.role} simulator exited with status "
                    f"{simulator.process.returncode}; see "
                    f"{self.data_dir / f'demo-simulator-{simulator.role}.log'}")
            try:
                if httpx.get(f"{simulator.base_url}/models", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the demo's {simulator.role} simulator did not answer within "
                           f"{START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        """SIGTERM each by PID, then SIGKILL what is left after STOP_TIMEOUT_S."""
        for simulator in self.running.values():
            if simulator.process.poll() is None:
                simulator.process.terminate()
        for simulator in self.running.values():
            try:
                simulator.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                simulator.process.kill()
                simulator.process.wait()

    def __enter__(self) -> DemoSimulators:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
