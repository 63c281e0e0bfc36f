"""One probe execution: an endpoint, a workload and a load profile in; samples and summary out."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import httpx

from probes.client.openai import encode_request, send_openai
from probes.client.secrets import resolve_secret
from probes.client.target import ApiKind, Target
from probes.load.open_loop import Request, run_open_loop
from probes.load.profiles import LoadProfile
from probes.load.schedule import arrival_offsets
from probes.measure.sample import Sample
from probes.measure.summary import RunSummary, summarise
from probes.workload.synthetic import Workload, request_body


@dataclass(frozen=True, slots=True)
class RunResult:
    samples: list[Sample]
    summary: RunSummary


def request_headers(target: Target) -> dict[str, str]:
    """Extra headers plus the bearer token from the secret reference (resolved now)."""
    headers = dict(target.headers)
    if target.auth_secret_ref is not None:
        headers["Authorization"] = f"Bearer {resolve_secret(target.auth_secret_ref)}"
    return headers


async def execute(
    client: httpx.AsyncClient, target: Target, workload: Workload, profile: LoadProfile
) -> RunResult:
    """Run the profile against the target. Raises SecretUnavailableError before sending if the
    auth reference cannot be resolved; endpoint failures become classified samples."""
    if target.api_kind is ApiKind.HTTP:
        raise NotImplementedError("api_kind 'http' probes arrive with the measurement engine")
    headers = request_headers(target)

    def prepare(seq: int) -> Request:
        body = request_body(workload, target.api_kind, target.model, seq)
        return partial(send_openai, client, target, encode_request(body, headers),
                       workload.stream)

    samples, measured_s = await run_open_loop(
        arrival_offsets(profile), prepare, max_in_flight=profile.max_in_flight
    )
    return RunResult(samples=samples, summary=summarise(samples, measured_s))
