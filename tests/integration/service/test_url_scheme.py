"""A URL typed without its scheme (`vllm:8000/v1`) is refused by the REST API saying what is
missing, with an example, not in the URL parser's words (`relative URL without a base`)."""

from __future__ import annotations

import httpx
import pytest

from sustain.service.schemas.common import URL_WITH_SCHEME


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "vllm:8000/v1", "gpu-1/v1"])
@pytest.mark.parametrize("field", ["base_url", "metrics_url"])
async def test_a_url_without_its_scheme_is_refused_saying_so(
        api: httpx.AsyncClient, url: str, field: str) -> None:
    body = {"name": "ep", "base_url": "http://127.0.0.1:9/v1", "model": "m", field: url}
    r = await api.post("/api/v1/endpoints", json=body)
    assert r.status_code == 422
    problem = r.json()
    assert [e["message"] for e in problem["errors"] if e["field"] == field] == \
        [URL_WITH_SCHEME]
    assert "e.g. http://host:8000/v1" in problem["detail"]
    assert "relative URL" not in r.text


async def test_a_url_with_another_scheme_still_says_which_schemes_are_taken(
        api: httpx.AsyncClient) -> None:
    r = await api.post("/api/v1/endpoints", json={"name": "ep", "base_url": "ftp://h/v1",
                                                  "model": "m"})
    assert r.status_code == 422
    assert "'http' or 'https'" in r.text
