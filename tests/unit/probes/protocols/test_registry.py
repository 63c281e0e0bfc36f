"""One object per API kind, and everything else asks it: the registry names every kind once,
each object's declarations hold (its workload fields exist and have flags, its figures are
measured fields, the simulator serves its route), and no module outside probes/protocols
switches on a kind."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import Measurement
from sustain.probes.protocols.base import ApiProtocol
from sustain.probes.protocols.registry import (
    KIND_NAMES,
    PROTOCOLS,
    find_protocol,
    is_check,
    is_conversation,
    protocol_of,
)
from sustain.probes.workload.spec import Workload
from sustain.service.cli.probe_flags import FLAG_OF, ProbeFlags
from sustain.simulator.app import GENERATE, ITEMS, MEDIA

ROOT = Path(__file__).resolve().parents[4]
KIND_SWITCH = re.compile(r"ApiKind\.|api_kind (?:==|!=|in|not in|is)\b(?!(?: not)? None)")
"""A test of a kind by its name: what an object's attribute says instead."""


def test_the_registry_holds_every_kind_once_in_the_enums_order() -> None:
    assert list(PROTOCOLS) == list(ApiKind)
    assert tuple(kind.value for kind in ApiKind) == KIND_NAMES
    assert all(protocol.kind is kind for kind, protocol in PROTOCOLS.items())
    assert len({id(protocol) for protocol in PROTOCOLS.values()}) == len(PROTOCOLS)


def test_a_kind_is_found_by_its_name_and_an_unknown_name_is_none() -> None:
    assert protocol_of("rerank") is PROTOCOLS[ApiKind.RERANK]
    assert find_protocol("grpc") is None
    assert not is_conversation("grpc")
    assert not is_check("grpc")
    with pytest.raises(KeyError):
        protocol_of("grpc")


@pytest.mark.parametrize("protocol", PROTOCOLS.values(), ids=KIND_NAMES)
def test_each_kinds_workload_fields_exist_and_have_a_flag(protocol: ApiProtocol) -> None:
    for name in protocol.workload_fields:
        assert name in Workload.model_fields
        assert name in FLAG_OF or name in ProbeFlags.model_fields


@pytest.mark.parametrize("protocol", PROTOCOLS.values(), ids=KIND_NAMES)
def test_each_kinds_figures_are_fields_of_the_measurement(protocol: ApiProtocol) -> None:
    fields = {field.name for field in dataclasses.fields(Measurement)}
    assert set(protocol.figures) <= fields


@pytest.mark.parametrize("protocol", PROTOCOLS.values(), ids=KIND_NAMES)
def test_the_simulator_serves_each_kinds_route(protocol: ApiProtocol) -> None:
    if is_check(protocol.kind):
        assert protocol.simulator_path == ""
    else:
        assert protocol.simulator_path in {**GENERATE, **ITEMS, **MEDIA}


def test_only_the_items_kinds_build_items_and_only_the_audio_kind_uploads() -> None:
    sizes = Workload(batch_size=2, documents=3, dimensions=4)
    for protocol in PROTOCOLS.values():
        body: dict[str, object] = {}
        if protocol.form == "items":
            protocol.item_body(body, "m", sizes, lambda count: ["t"] * count, lambda: "q")
            assert isinstance(protocol.expected_items(body, sizes), ExpectedItems)
        else:
            with pytest.raises(NotImplementedError):
                protocol.item_body(body, "m", sizes, lambda count: ["t"] * count, lambda: "q")
        if protocol.form == "audio":
            payload, headers = protocol.encode_upload({"model": "m"}, b"RIFF", {})
            assert b"RIFF" in payload
            assert headers["content-type"].startswith("multipart/")
        else:
            with pytest.raises(NotImplementedError):
                protocol.encode_upload({"model": "m"}, b"RIFF", {})


@pytest.mark.parametrize("protocol", PROTOCOLS.values(), ids=KIND_NAMES)
def test_a_kind_runs_its_own_exchange_exactly_when_it_says_it_is_exchanged(
        protocol: ApiProtocol) -> None:
    assert (type(protocol).exchange is not ApiProtocol.exchange) is protocol.exchanged


def test_the_api_flag_lists_every_kind_and_a_kinds_flag_names_its_kinds() -> None:
    assert ProbeFlags.model_fields["api"].metadata[0].help == " | ".join(KIND_NAMES) + "."
    assert ProbeFlags.model_fields["documents"].metadata[0].help == \
        "--api rerank: documents per request."
    assert ProbeFlags.model_fields["poll_interval"].metadata[0].help.startswith(
        "--api openai-videos: seconds between polls")


def test_no_module_outside_the_protocols_switches_on_a_kind() -> None:
    found = []
    for folder in ("probes", "service"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(ROOT / "probes" / "protocols"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if KIND_SWITCH.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
