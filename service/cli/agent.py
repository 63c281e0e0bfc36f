"""`sustain agent`: run a location's probes where the database cannot be reached, talking to
the service over HTTPS only (outbound; nothing connects to the agent but its own health and
metrics port, bound to loopback unless told otherwise)."""

from __future__ import annotations

import asyncio
import ipaddress
import os
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer

from sustain.service.cli.common import (
    DataDirOpt,
    console,
    load_settings,
    warn_deprecated_variables,
)
from sustain.service.logging import configure_logging

KEY_VAR = "SUSTAIN_AGENT_KEY"


def plain_http_problem(server: str, allowed: bool) -> str | None:
    """Why `server` is refused: the key would cross the network in clear (http:// to a host
    that is not loopback), unless asked for in so many words."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "--server: an http(s):// URL of the sustain service"
    if parts.scheme == "https" or allowed:
        return None
    host = parts.hostname
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None
    return ("--server: http:// would send the agent key in clear; use https://, or pass "
            "--allow-plain-http inside a network you trust")


def agent(
    server: Annotated[str, typer.Option(help="The sustain service's URL (https://...).")],
    location: Annotated[str, typer.Option(
        help="The location this agent measures from; its key must name the same.")],
    name: Annotated[str | None, typer.Option(
        help="This agent process's name (default: host name and pid).")] = None,
    spool_dir: Annotated[Path | None, typer.Option(
        help="Where finished runs wait for upload (default: DATA_DIR/agent-spool/LOCATION).")
    ] = None,
    spool_max_mb: Annotated[int, typer.Option(
        min=1, max=1_000_000, help="The spool's bound in MiB; at 90 % no new run starts.")
    ] = 512,
    host: Annotated[str, typer.Option(help="Address of /healthz, /readyz and /metrics.")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8001,
    heartbeat_seconds: Annotated[float, typer.Option(min=0.2, max=300)] = 5.0,
    allow_plain_http: Annotated[bool, typer.Option(
        help="Allow an http:// --server beyond loopback.")] = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Run the probes of LOCATION here, in worker processes of this host, and upload their
    runs to the service (key from SUSTAIN_AGENT_KEY, a key of the agent role for the same
    location). Runs survive an outage of the service on disk, bounded by --spool-max-mb."""
    from sustain.service.ticks.locations import location_problem

    settings = load_settings(data_dir=data_dir, location=location)
    configure_logging(settings.log_level, settings.log_format)
    warn_deprecated_variables()
    key = os.environ.get(KEY_VAR, "").strip()
    problems = [p for p in (
        plain_http_problem(server, allow_plain_http), location_problem(location),
        None if key else f"{KEY_VAR}: set it to a key of the agent role "
                         "(sustain keys create --role agent --location ...)") if p]
    if problems:
        for problem in problems:
            console.print(f"[red]{problem}[/red]", highlight=False, markup=False)
        raise typer.Exit(2)
    asyncio.run(_run(server, key, location, name, spool_dir or (
        settings.data_dir / "agent-spool" / location), spool_max_mb, host, port,
        heartbeat_seconds))


async def _run(server: str, key: str, location: str, name: str | None, spool_dir: Path,
               spool_max_mb: int, host: str, port: int, heartbeat_s: float) -> None:
    import uvicorn

    from sustain.probes.client.clients import HttpClients
    from sustain.probes.runner import InProcess, Measurer
    from sustain.probes.workers.pool import WorkerPool
    from sustain.service.agent.agent import Agent, default_name
    from sustain.service.agent.client import ServiceClient
    from sustain.service.agent.spool import Spool
    from sustain.service.agent.status import status_app
    from sustain.service.cli.common import load_settings as settings_now

    settings = settings_now(location=location)
    reach = settings.reach()
    workers = settings.worker_processes()
    measurer: Measurer = InProcess(HttpClients(settings.http_max_connections,
                                               egress=reach.egress)) if workers == 0 \
        else WorkerPool(workers, max_connections=settings.http_max_connections,
                        egress=reach.egress)
    the_agent = Agent(ServiceClient(server, key, name or default_name()), measurer,
                      Spool(spool_dir, spool_max_mb * 1024 * 1024), location=location,
                      heartbeat_s=heartbeat_s, reach=reach, limits=settings.load_limits())
    config = uvicorn.Config(status_app(the_agent), host=host, port=port, log_config=None,
                            access_log=False, lifespan="off")
    web = uvicorn.Server(config)
    await the_agent.start()
    try:
        await web.serve()
    finally:
        await the_agent.stop()
