"""The compose stack users run (docker-compose.yml), driven with `docker compose`."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.live.docker import docker
from tests.processes import TEST_ADMIN_KEY

SERVICES = ("postgres", "simulator", "sustain", "sustain-west", "prometheus", "alertmanager")
"""Every service but Grafana, which has no image or stand-in on a machine without a registry."""

PORTS = {"sustain": 8000, "simulator": 8001, "prometheus": 9090, "alertmanager": 9093}
"""Loopback ports the compose file publishes."""


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ComposeStack:
    """One project of the compose file; `up` waits for health, `down` removes everything."""

    def __init__(self, file: Path, project: str) -> None:
        self.file = file
        self.project = project
        self.env = {"SUSTAIN_ADMIN_KEY": TEST_ADMIN_KEY}

    def compose(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        return docker("compose", "--file", str(self.file), "--project-name", self.project,
                      *args, timeout_s=timeout_s, env=self.env)

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{PORTS[service]}"

    def up(self) -> None:
        taken = [f"{name} ({port})" for name, port in PORTS.items() if _port_taken(port)]
        assert not taken, f"loopback ports the compose file publishes are taken: {taken}"
        self.down()  # what a crashed earlier session may have left (volumes included)
        self.compose("up", "--detach", "--wait", "--wait-timeout", "240", "--no-build",
                     "--pull", "never", *SERVICES, timeout_s=300)

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "60", timeout_s=180)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes still labelled with this project."""
        label = f"label=com.docker.compose.project={self.project}"
        return {
            "containers": docker("ps", "--all", "--quiet", "--filter", label).stdout.split(),
            "networks": docker("network", "ls", "--quiet", "--filter", label).stdout.split(),
            "volumes": docker("volume", "ls", "--quiet", "--filter", label).stdout.split(),
        }

    @property
    def network(self) -> str:
        """The project's default network, which compose names PROJECT_default."""
        return f"{self.project}_default"
