"""`sustain simulate`: the OpenAI-compatible simulator, served. Its options besides the bind
address and the key are SimulatorConfig's settings (flags.takes_config), declared there once
with their help, default and range."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from sustain.service.cli.common import say
from sustain.service.cli.flags import config_option, takes_config
from sustain.simulator.config import SimulatorConfig, SimulatorConfigError, options


@takes_config(SimulatorConfig)
def simulate(
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Bind port.")] = 8001,
    api_key_env: Annotated[str | None, typer.Option(
        help="Require the key read from this env variable: `Authorization: Bearer <key>` "
        "(`x-api-key: <key>` on /v1/messages).")]
    = None,
    **settings: Any,
) -> None:
    """Run the simulator (http://HOST:PORT/v1): OpenAI chat, completions, responses,
    embeddings and transcriptions, Anthropic messages, rerank."""
    from sustain.simulator.server import serve as serve_simulator

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            say(f"--api-key-env: variable {api_key_env} is not set", "red")
            raise typer.Exit(2)
    try:
        config = SimulatorConfig(**settings, api_key=api_key)
    except SimulatorConfigError as exc:
        flagged = options()
        say("; ".join(f"{config_option(name, flagged[name])}: {problem}"
                      for name, problem in exc.problems), "red")
        raise typer.Exit(2) from None
    say(f"simulator on http://{host}:{port}/v1 (ttft {config.ttft_ms} ms, "
        f"itl {config.itl_ms} ms)")
    serve_simulator(config, host, port)
