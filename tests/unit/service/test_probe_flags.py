"""The flags of `sustain probe`: parsed once into ProbeFlags, then built into the run they
describe; every problem is a FlagError that names its flag."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sustain.probes.load.profiles import (
    ConcurrencyProfile,
    ConstantProfile,
    PoissonProfile,
    SingleProfile,
    StepsProfile,
    SweepProfile,
)
from sustain.probes.measure.slo import SloThresholds
from sustain.service.cli import app
from sustain.service.cli.flags import command_parameters
from sustain.service.cli.oneshot import build
from sustain.service.cli.probe_flags import FlagError, ProbeFlags
from sustain.service.policy.limits import LoadLimits
from sustain.service.scheduling.one_shot import OneShot

URL = "http://127.0.0.1:8001/v1"


def flags(**given: Any) -> ProbeFlags:
    """The flags as the command passes them: values as typed, unset ones at their default."""
    return ProbeFlags.parse({"base_url": URL, "model": "m", **given})


def shot(**given: Any) -> OneShot:
    return build(flags(**given))


def refused(**given: Any) -> str:
    """The message of the FlagError the flags give, parsed and built."""
    with pytest.raises(FlagError) as info:
        shot(**given)
    return str(info.value)


def test_every_field_is_an_option_of_the_command_with_its_help() -> None:
    command = typer.main.get_command(app).commands["probe"]  # type: ignore[attr-defined]
    by_name = {param.name: param for param in command.params}
    assert set(by_name) == set(ProbeFlags.model_fields)
    for name in ProbeFlags.model_fields:
        assert getattr(by_name[name], "help", None) or name == "base_url"
    help_text = CliRunner().invoke(app, ["probe", "--help"], terminal_width=200).output
    for spelling in ("--json", "--no-stream", "--allow-cache", "--database-url", "--header",
                     "--slo-ttft-ms", "--max-concurrency"):
        assert spelling in help_text


def test_the_command_defaults_parse_to_the_field_defaults() -> None:
    defaults = {p.name: p.default for p in command_parameters(ProbeFlags)
                if p.default is not inspect.Parameter.empty}
    assert ProbeFlags.parse({**defaults, "base_url": URL, "model": "m"}) == \
        ProbeFlags(base_url=URL, model="m")


def test_the_command_line_reaches_the_flags_as_typed() -> None:
    command = typer.main.get_command(app).commands["probe"]  # type: ignore[attr-defined]
    context = command.make_context("probe", [
        URL, "--model", "m", "--header", "X-A: 1", "--header", "X-B:2", "--levels", "1,2,4",
        "--profile", "steps", "--json", "--no-stream", "--method", "post"])
    assert ProbeFlags.parse(context.params) == ProbeFlags(
        base_url=URL, model="m", header={"X-A": "1", "X-B": "2"}, levels=[1.0, 2.0, 4.0],
        profile="steps", json_output=True, no_stream=True, method="POST")


def test_a_flag_problem_is_named_on_the_command_line() -> None:
    result = CliRunner().invoke(app, ["probe", URL, "--model", "m", "--profile", "constant"])
    assert result.exit_code == 2
    assert "--rate is required with --profile constant" in result.output


def test_single_profile_is_the_default() -> None:
    assert shot().profile == SingleProfile()


def test_constant_profile_requires_rate() -> None:
    assert refused(profile="constant") == "--rate is required with --profile constant"


def test_poisson_profile_requires_rate() -> None:
    assert refused(profile="poisson") == "--rate is required with --profile poisson"


def test_concurrency_profile_requires_concurrency() -> None:
    assert refused(profile="concurrency") == \
        "--concurrency is required with --profile concurrency"


@pytest.mark.parametrize("kind", ["steps", "sweep"])
def test_steps_and_sweep_profiles_require_levels(kind: str) -> None:
    assert refused(profile=kind) == f"--levels is required with --profile {kind}"


KINDS = "capacity, concurrency, constant, pareto, poisson, single, steps, sweep, trace"


def test_unknown_profile_is_named_with_the_valid_ones() -> None:
    assert refused(profile="warp") == f"--profile: unknown profile 'warp' (one of {KINDS})"


def test_constant_profile_sends_for_ten_seconds_unless_told() -> None:
    assert shot(profile="constant", rate=5.0).profile == ConstantProfile(
        rate=5.0, duration_s=10.0)
    assert shot(profile="constant", rate=5.0, duration=2.5, max_requests=7,
                warmup=1.0).profile == ConstantProfile(rate=5.0, duration_s=2.5,
                                                       max_requests=7, warmup_s=1.0)


def test_poisson_profile_takes_burstiness() -> None:
    assert shot(profile="poisson", rate=3.0, burstiness=0.5).profile == PoissonProfile(
        rate=3.0, burstiness=0.5, duration_s=10.0)


def test_concurrency_profile_capped_by_max_requests_has_no_duration() -> None:
    assert shot(profile="concurrency", concurrency=4, max_requests=20).profile == \
        ConcurrencyProfile(users=4, max_requests=20)
    assert shot(profile="concurrency", concurrency=4).profile == \
        ConcurrencyProfile(users=4, duration_s=10.0)


def test_steps_levels_are_rates_each_its_own_stage() -> None:
    profile = shot(profile="steps", levels="5,10", duration=2.0).profile
    assert isinstance(profile, StepsProfile)
    assert [(s.rate, s.concurrency, s.duration_s) for s in profile.stages] == \
        [(5.0, None, 2.0), (10.0, None, 2.0)]


def test_sweep_levels_are_users() -> None:
    assert shot(profile="sweep", levels="1,2,4", max_requests=30).profile == SweepProfile(
        levels=[1, 2, 4], duration_s=10.0, max_requests=30)


@pytest.mark.parametrize("levels", ["1,2.5", "1,inf", "nan"])
def test_sweep_levels_must_be_whole_numbers(levels: str) -> None:
    assert refused(profile="sweep", levels=levels) == \
        "--levels: sweep levels are whole numbers of users"


def test_sweep_levels_must_ascend() -> None:
    message = refused(profile="sweep", levels="8,2")
    assert message.startswith("--levels: ")
    assert "ascending" in message


def test_levels_are_numbers_separated_by_commas() -> None:
    assert flags(levels="1, 2.5,,4").levels == [1.0, 2.5, 4.0]
    assert flags().levels is None


def test_levels_that_are_not_numbers_are_refused() -> None:
    assert refused(levels="1,two") == \
        "--levels: expected numbers separated by commas, got '1,two'"


def test_headers_are_name_value_pairs_split_at_the_first_colon() -> None:
    parsed = flags(header=[" X-Trace : a:b ", "X-Empty:"]).header
    assert parsed == {"X-Trace": "a:b", "X-Empty": ""}
    assert shot(header=["X-Trace: 1"]).endpoint.headers == {"X-Trace": "1"}
    assert flags(header=None).header == {}


@pytest.mark.parametrize("pair", ["no-colon", ": v", "Bearer sk-typed-in-the-wrong-place"])
def test_header_without_name_or_colon_is_refused_without_echoing_it(pair: str) -> None:
    message = refused(header=["X-Ok: 1", pair])
    assert message == "--header: expected NAME:VALUE (header 2, its text not echoed)"


def test_credential_header_is_refused_naming_header() -> None:
    message = refused(header=["Authorization: Bearer x"])
    assert message.startswith("--header: ")
    assert "use --api-key-env VAR" in message, "the flag the user types"
    assert "auth_secret_ref" not in message


def test_model_is_required_except_for_the_http_api() -> None:
    with pytest.raises(FlagError, match=r"^--model is required with --api openai-chat$"):
        ProbeFlags.parse({"base_url": URL})
    with pytest.raises(FlagError, match=r"^--model is required with --api openai-completions"):
        ProbeFlags.parse({"base_url": URL, "api": "openai-completions"})
    assert ProbeFlags.parse({"base_url": URL, "api": "http"}).model is None


def test_unknown_api_is_named() -> None:
    assert refused(api="grpc").startswith("--api: ")


def test_http_api_splits_the_url_into_endpoint_and_request() -> None:
    http = build(ProbeFlags.parse({
        "base_url": "http://10.0.0.7:8080/health?verbose=1", "api": "http",
        "method": "head", "expect_status": 204, "expect_body": "ok"}))
    assert str(http.endpoint.base_url) == "http://10.0.0.7:8080/"
    assert http.endpoint.name == "cli-10.0.0.7-8080"
    assert http.endpoint.model == "n/a"
    check = http.endpoint.http_check
    assert check is not None
    assert (check.method, check.path, check.expected_status, check.body_contains) == \
        ("HEAD", "/health?verbose=1", 204, "ok")


def test_http_api_without_a_path_requests_the_root() -> None:
    http = build(ProbeFlags.parse({"base_url": "https://example.test", "api": "http"}))
    assert http.endpoint.http_check is not None
    assert http.endpoint.http_check.path == "/"
    assert http.endpoint.name == "cli-example.test"


def test_openai_api_keeps_the_url_and_sends_no_check() -> None:
    endpoint = shot(api="openai-completions", http2=True).endpoint
    assert str(endpoint.base_url) == URL
    assert (endpoint.api_kind, endpoint.model, endpoint.http2) == \
        ("openai-completions", "m", True)
    assert endpoint.http_check is None
    assert endpoint.name == "cli-127.0.0.1-8001"


def test_http_method_is_named_when_unknown() -> None:
    brew = ProbeFlags.parse({"base_url": URL, "api": "http", "method": "brew"})
    with pytest.raises(FlagError, match=r"^--method: "):
        build(brew)


def test_api_key_env_becomes_a_secret_reference() -> None:
    assert shot(api_key_env="MY_KEY").endpoint.auth_secret_ref == "env:MY_KEY"
    assert shot().endpoint.auth_secret_ref is None


def test_the_one_variable_named_may_be_read_but_never_sustains_own() -> None:
    policy = shot(api_key_env="MY_KEY").secrets
    assert policy.check("env:MY_KEY") is None
    assert policy.check("env:OTHER_KEY") is not None
    assert shot(api_key_env="SUSTAIN_DATABASE_URL").secrets.check(
        "env:SUSTAIN_DATABASE_URL") is not None


@pytest.mark.parametrize("url", ["http://169.254.169.254/v1", "http://2852039166/v1",
                                 "http://[::ffff:a9fe:a9fe]/v1",
                                 "http://metadata.google.internal/v1"])
def test_a_metadata_address_is_refused_naming_base_url(url: str) -> None:
    with pytest.raises(FlagError, match=r"^BASE_URL: egress denied: .*always denied"):
        shot(base_url=url)


def test_workload_from_token_flags_and_no_stream() -> None:
    workload = shot(input_tokens=100, output_tokens=7, no_stream=True).workload
    assert (workload.input_tokens, workload.max_tokens, workload.stream) == (100, 7, False)
    assert shot().workload.stream


def test_slo_thresholds_from_the_slo_flags() -> None:
    assert shot(slo_ttft_ms=500.0, slo_e2e_ms=2000.0).slo == SloThresholds(
        ttft_ms=500.0, e2e_ms=2000.0)
    assert shot().slo == SloThresholds()


@pytest.mark.parametrize(("given", "flag"), [
    ({"profile": "constant", "rate": -3.0}, "--rate"),
    ({"profile": "poisson", "rate": 1.0, "burstiness": 0.0}, "--burstiness"),
    ({"profile": "concurrency", "concurrency": 0}, "--concurrency"),
    ({"profile": "constant", "rate": 1.0, "duration": 0.0}, "--duration"),
    ({"profile": "constant", "rate": 1.0, "max_requests": 0}, "--max-requests"),
    ({"warmup": -1.0}, "--warmup"),
    ({"input_tokens": 0}, "--input-tokens"),
    ({"output_tokens": 0}, "--output-tokens"),
    ({"slo_tpot_ms": -1.0}, "--slo-tpot-ms"),
    ({"base_url": "127.0.0.1:8000"}, "BASE_URL"),
    ({"api_key_env": "not a name"}, "--api-key-env"),
])
def test_a_value_out_of_range_names_its_flag(given: dict[str, Any], flag: str) -> None:
    assert refused(**given).startswith(f"{flag}: ")


def test_every_problem_of_the_flags_themselves_is_reported() -> None:
    message = refused(header=["bad"], levels="x", profile="warp")
    assert message.split("; ") == [
        "--header: expected NAME:VALUE (header 1, its text not echoed)",
        "--levels: expected numbers separated by commas, got 'x'",
        f"--profile: unknown profile 'warp' (one of {KINDS})",
    ]


def test_a_field_of_the_wrong_type_names_its_flag() -> None:
    with pytest.raises(FlagError, match=r"^--expect-status: "):
        flags(expect_status="many")


def test_flags_are_immutable() -> None:
    with pytest.raises(ValueError, match="frozen"):
        flags().rate = 2.0  # type: ignore[misc]


LIMITS = LoadLimits(max_rate=100, max_concurrency=64, max_run_s=600,
                    max_run_requests=10_000)


@pytest.mark.parametrize(("given", "message"), [
    ({"profile": "constant", "rate": 500},
     "--rate: 500 requests/s; at most 100 (SUSTAIN_MAX_RATE)"),
    ({"profile": "concurrency", "concurrency": 65, "max_requests": 5},
     "--concurrency: users is 65; at most 64 (SUSTAIN_MAX_CONCURRENCY)"),
    ({"profile": "sweep", "levels": "1,100"},
     "--levels: the highest level is 100; at most 64 (SUSTAIN_MAX_CONCURRENCY)"),
    ({"profile": "steps", "levels": "1,200"},
     "--levels: 200 requests/s; at most 100 (SUSTAIN_MAX_RATE)"),
    ({"profile": "constant", "rate": 1, "duration": 601},
     "--duration: warmup_s + duration_s = 601 s; at most 600 s per run "
     "(SUSTAIN_MAX_RUN_S)"),
    ({"profile": "constant", "rate": 1, "duration": 300, "warmup": 301},
     "--duration: warmup_s + duration_s = 601 s; at most 600 s per run "
     "(SUSTAIN_MAX_RUN_S)"),
    ({"profile": "concurrency", "concurrency": 2, "max_requests": 10_001},
     "--max-requests: max_requests = 10,001 requests; at most 10,000 per run "
     "(SUSTAIN_MAX_RUN_REQUESTS)"),
])
def test_flags_beyond_the_load_limits_name_the_flag(given: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(FlagError) as info:
        build(flags(**given), LIMITS)
    assert str(info.value) == message


def test_open_loops_keep_no_more_in_flight_than_the_concurrency_limit() -> None:
    profile = build(flags(profile="constant", rate=5), LIMITS).profile
    assert isinstance(profile, ConstantProfile)
    assert profile.max_in_flight == 64
    assert build(flags(profile="constant", rate=5)).profile.max_in_flight == 256


def test_a_pgvector_store_is_read_from_the_variable_named_and_no_other() -> None:
    run = shot(rag_corpus="c.jsonl", rag_embed_url=URL, rag_pgvector_env="RAG_PG_URL",
               api_key_env="MY_KEY")
    assert run.workload.rag is not None
    assert run.workload.rag.pgvector_dsn_ref == "env:RAG_PG_URL"
    assert set(run.secrets.env_globs) == {"MY_KEY", "RAG_PG_URL"}
    assert shot(rag_corpus="c.jsonl", rag_embed_url=URL).secrets.env_globs == ()


def test_the_operators_rate_limit_is_the_only_one() -> None:
    """Past 10,000 requests/s a run is refused by SUSTAIN_MAX_RATE alone, never by the
    profile's own schema."""
    fast = replace(LIMITS, max_rate=30_000.0, max_run_requests=1_000_000)
    for rate in (16_000, 24_000):
        profile = build(flags(profile="constant", rate=rate, duration=10), fast).profile
        assert isinstance(profile, ConstantProfile)
        assert profile.rate == rate
    with pytest.raises(FlagError) as info:
        build(flags(profile="constant", rate=40_000, duration=10), fast)
    assert str(info.value) == "--rate: 40,000 requests/s; at most 30,000 (SUSTAIN_MAX_RATE)"
