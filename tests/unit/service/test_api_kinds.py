"""Every protocol the probes speak is one an endpoint may name, and no other."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from sustain.probes.client.target import ApiKind
from sustain.probes.protocols.registry import PROTOCOLS
from sustain.service.schemas.endpoints import ApiKindName, EndpointCreate


def test_the_schema_names_exactly_the_probes_api_kinds() -> None:
    assert set(get_args(ApiKindName)) == {kind.value for kind in ApiKind}


def test_every_kind_has_its_protocol_object() -> None:
    assert set(PROTOCOLS) == set(ApiKind)
    assert all(protocol.kind is kind for kind, protocol in PROTOCOLS.items())


@pytest.mark.parametrize("kind", [kind.value for kind in ApiKind])
def test_an_endpoint_may_name_each_kind(kind: str) -> None:
    endpoint = EndpointCreate.model_validate(
        {"name": "e", "base_url": "http://127.0.0.1:8000/v1", "api_kind": kind, "model": "m"})
    assert endpoint.api_kind == kind


def test_an_unknown_kind_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as caught:
        EndpointCreate.model_validate({"name": "e", "base_url": "http://127.0.0.1:8000/v1",
                                       "api_kind": "grpc", "model": "m"})
    assert caught.value.errors()[0]["loc"] == ("api_kind",)
