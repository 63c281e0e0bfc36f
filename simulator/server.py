"""Serving the simulator: in the foreground (CLI) or on a background thread (tests, demo)."""

from __future__ import annotations

import asyncio
import threading
import time

import uvicorn

from sustain.simulator.app import create_app
from sustain.simulator.config import SimulatorConfig


def _server(config: SimulatorConfig, sock_port: int, host: str,
            tls: tuple[str, str] | None = None) -> uvicorn.Server:
    """uvicorn serving the simulator; over TLS with `tls` (certificate file, key file)."""
    return uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=host,
            port=sock_port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
            ssl_certfile=None if tls is None else tls[0],
            ssl_keyfile=None if tls is None else tls[1],
        )
    )


def serve(config: SimulatorConfig, host: str = "127.0.0.1", port: int = 8001) -> None:
    """Serve until interrupted (SIGINT/SIGTERM)."""
    _server(config, port, host).run()


class BackgroundSimulator:
    """The simulator on a thread with its own event loop, on a free loopback port.

    Use as a context manager; `base_url` is the OpenAI API root (`.../v1`). uvicorn binds the
    port itself (port 0): a socket handed to it from outside misses TCP_NODELAY, and Nagle's
    algorithm then delays small writes by the peer's delayed ACK (~40 ms). With `tls`
    (certificate file, key file: PEM), it serves https.
    """

    def __init__(self, config: SimulatorConfig | None = None, host: str = "127.0.0.1",
                 tls: tuple[str, str] | None = None) -> None:
        self.config = config or SimulatorConfig()
        self.host = host
        self.port = 0
        self.scheme = "http" if tls is None else "https"
        self._server = _server(self.config, 0, host, tls)
        self._thread = threading.Thread(target=self._run, name="sustain-simulator", daemon=True)

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/v1"

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    def start(self) -> BackgroundSimulator:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("simulator failed to start")
            time.sleep(0.01)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
