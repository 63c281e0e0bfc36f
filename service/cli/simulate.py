"""`sustain simulate`: the OpenAI-compatible simulator, served."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from sustain.service.cli.common import (
    say,
)


def simulate(
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Bind port.")] = 8001,
    ttft_ms: Annotated[float, typer.Option(help="Time to first token, ms.")] = 50.0,
    itl_ms: Annotated[float, typer.Option(help="Inter-token latency, ms.")] = 10.0,
    output_tokens: Annotated[int, typer.Option(help="Tokens per response (max).")] = 32,
    model: Annotated[str, typer.Option(help="Model name to report.")] = "sim-model",
    fault: Annotated[str, typer.Option(help="Fault to inject into --fault-rate of requests.")]
    = "none",
    fault_rate: Annotated[float, typer.Option(help="Fraction of requests with --fault.")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed for jitter and fault selection.")] = 0,
    prefill_ms_per_token: Annotated[float, typer.Option(
        help="Added to TTFT per prompt token not served from the prefix cache, ms.")] = 0.0,
    no_prefix_cache: Annotated[bool, typer.Option(
        "--no-prefix-cache", help="Do not emulate prefix caching (nor report cached_tokens).")]
    = False,
    ttft_sigma: Annotated[float, typer.Option(help="Lognormal jitter of TTFT (sigma).")] = 0.0,
    itl_sigma: Annotated[float, typer.Option(help="Lognormal jitter of ITL (sigma).")] = 0.0,
    max_batch: Annotated[int | None, typer.Option(
        help="Generations at once; more requests queue, so TTFT rises past saturation.")]
    = None,
    error_every: Annotated[int, typer.Option(help="Answer every Nth request with HTTP 500.")]
    = 0,
    truth_log: Annotated[Path | None, typer.Option(
        help="Append per-request server-side timings (JSON lines) to this file.")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Require the key read from this env variable: `Authorization: Bearer <key>` "
        "(`x-api-key: <key>` on /v1/messages).")]
    = None,
    item_ms: Annotated[float, typer.Option(
        help="Embeddings and rerank: added per input or document, ms.")] = 1.0,
    embedding_dimensions: Annotated[int, typer.Option(
        help="Length of the simulated embedding vectors.")] = 64,
    audio_ms_per_s: Annotated[float, typer.Option(
        help="Transcriptions: added to the first text per second of audio, ms.")] = 20.0,
    gpu_power_w: Annotated[float | None, typer.Option(
        help="Also expose DCGM power and energy series, each GPU drawing this many W.")]
    = None,
    gpus: Annotated[int, typer.Option(help="--gpu-power-w: GPUs to expose.")] = 1,
    prompt_chars_per_token: Annotated[float | None, typer.Option(
        help="Count each prompt word as ceil(length / this) tokens, as a subword tokenizer "
        "does (3: about 1.8 a word); unset: one token a word.")] = None,
    chat_template_tokens: Annotated[int, typer.Option(
        help="Add this many tokens to the prompt count of every chat-shaped request.")] = 0,
) -> None:
    """Run the simulator (http://HOST:PORT/v1): OpenAI chat, completions, responses,
    embeddings and transcriptions, Anthropic messages, rerank."""
    from sustain.simulator.config import Fault, SimulatorConfig
    from sustain.simulator.server import serve as serve_simulator

    try:
        chosen = Fault(fault)
    except ValueError:
        say(f"--fault must be one of {', '.join(f.value for f in Fault)}", "red")
        raise typer.Exit(2) from None
    problems = [
        "--fault-rate must be in [0, 1]" if not 0.0 <= fault_rate <= 1.0 else "",
        "--ttft-ms, --itl-ms, --output-tokens and --prefill-ms-per-token must be >= 0"
        if min(ttft_ms, itl_ms, output_tokens, prefill_ms_per_token) < 0 else "",
        "--ttft-sigma and --itl-sigma must be >= 0" if min(ttft_sigma, itl_sigma) < 0 else "",
        "--max-batch must be >= 1" if max_batch is not None and max_batch < 1 else "",
        "--error-every must be >= 0" if error_every < 0 else "",
        "--item-ms and --audio-ms-per-s must be >= 0" if min(item_ms, audio_ms_per_s) < 0
        else "",
        "--gpu-power-w must be > 0 and --gpus from 1 to 64"
        if (gpu_power_w is not None and gpu_power_w <= 0) or not 1 <= gpus <= 64 else "",
        "--embedding-dimensions must be from 1 to 65536"
        if not 1 <= embedding_dimensions <= 65_536 else "",
        "--prompt-chars-per-token must be > 0"
        if prompt_chars_per_token is not None and not prompt_chars_per_token > 0 else "",
        "--chat-template-tokens must be >= 0" if chat_template_tokens < 0 else "",
    ]
    if any(problems):
        say("" + "; ".join(p for p in problems if p) + "", "red")
        raise typer.Exit(2)
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            say(f"--api-key-env: variable {api_key_env} is not set", "red")
            raise typer.Exit(2)
    config = SimulatorConfig(ttft_ms=ttft_ms, itl_ms=itl_ms, output_tokens=output_tokens,
                             model=model, fault=chosen, fault_rate=fault_rate, seed=seed,
                             api_key=api_key, ttft_sigma=ttft_sigma, itl_sigma=itl_sigma,
                             max_batch=max_batch, error_every=error_every,
                             prefill_ms_per_token=prefill_ms_per_token,
                             prefix_cache=not no_prefix_cache, item_ms=item_ms,
                             embedding_dimensions=embedding_dimensions,
                             audio_ms_per_s=audio_ms_per_s, gpu_power_w=gpu_power_w,
                             gpus=gpus, prompt_chars_per_token=prompt_chars_per_token,
                             chat_template_tokens=chat_template_tokens,
                             truth_log=None if truth_log is None else str(truth_log))
    say(f"simulator on http://{host}:{port}/v1 (ttft {ttft_ms} ms, itl {itl_ms} ms)")
    serve_simulator(config, host, port)
