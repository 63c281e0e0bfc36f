"""A RAG probe's endpoints, judged the same way at create and update (REST) and in the config
file: the workload's `rag` and the probe's `rag_endpoints` come together, the probe's own
endpoint generates (a chat kind), the others embed and rerank. The same rules hold again when
the probe runs (probes/load/rag.py), since an endpoint's api_kind may change after."""

from __future__ import annotations

from sustain.probes.protocols.registry import is_conversation, rag_stage_of

PAIRING = {
    (True, False): "a rag workload needs the probe's rag_endpoints (at least its embeddings "
                   "endpoint)",
    (False, True): "rag_endpoints are used only with a rag workload (workload.rag)",
}
"""(workload has rag, rag_endpoints given): why that pair is refused."""

Part = str
"""Which of the probe's fields a problem is about: `endpoint`, `embed`, `rerank`."""


def pairing_problem(has_rag_workload: bool, has_rag_endpoints: bool) -> str | None:
    """Why a workload with (or without) `rag` cannot go with (or without) rag_endpoints."""
    return PAIRING.get((has_rag_workload, has_rag_endpoints))


def kind_problems(generate_kind: str, embed_kind: str | None, rerank_kind: str | None
                  ) -> list[tuple[Part, str]]:
    """What is wrong with the api_kinds of a RAG probe's endpoints (None: that endpoint is not
    given)."""
    problems: list[tuple[Part, str]] = []
    if not is_conversation(generate_kind):
        problems.append(("endpoint", "a rag probe generates with its own endpoint, which must "
                         "be of a chat kind (openai-chat, openai-responses or "
                         f"anthropic-messages), not {generate_kind}"))
    if embed_kind is not None and rag_stage_of(embed_kind) != "embed":
        problems.append(("embed", "the rag embeddings endpoint must be of api_kind "
                         f"openai-embeddings, not {embed_kind}"))
    if rerank_kind is not None and rag_stage_of(rerank_kind) != "rerank":
        problems.append(("rerank", f"the rag rerank endpoint must be of api_kind rerank, "
                         f"not {rerank_kind}"))
    return problems
