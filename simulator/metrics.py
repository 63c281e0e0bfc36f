"""The simulator's /metrics, named as vLLM names its own, so that sustain's server telemetry
(and any vLLM dashboard) reads it as it reads a vLLM server: requests running and waiting
(the queue behind `max_batch`), KV-cache use (running over `max_batch`, a stand-in for the
blocks they hold), prefix-cache queries and hits (tokens), preemptions (never, here), prompt
and generation tokens. An app-owned registry, as client_python recommends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest


class EngineMetrics:
    def __init__(self, model: str, max_batch: int | None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.max_batch = max_batch
        labels = ["model_name"]

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(name, text, labels, registry=self.registry)

        def counter(name: str, text: str) -> Counter:
            return Counter(name, text, labels, registry=self.registry)

        self.running_gauge = gauge("vllm:num_requests_running",
                                   "Number of requests in model execution batches.")
        self.waiting_gauge = gauge("vllm:num_requests_waiting",
                                   "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc",
                              "KV-cache usage. 1 means 100 percent usage.")
        self.cache_queries = counter("vllm:prefix_cache_queries",
                                     "Prefix cache queries, in terms of number of queried tokens.")
        self.cache_hits = counter("vllm:prefix_cache_hits",
                                  "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = counter("vllm:num_preemptions",
                                   "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens",
                                         "Number of generation tokens processed.")
        self.model = model
        for metric in (self.running_gauge, self.waiting_gauge, self.kv_usage, self.cache_queries,
                       self.cache_hits, self.preemptions, self.prompt_tokens,
                       self.generation_tokens):
            metric.labels(model)  # exported at zero from the start, as vLLM does
        self._running = 0

    def admitted(self, prompt_tokens: int, cached_tokens: int | None) -> None:
        self.prompt_tokens.labels(self.model).inc(prompt_tokens)
        if cached_tokens is not None:
            self.cache_queries.labels(self.model).inc(prompt_tokens)
            self.cache_hits.labels(self.model).inc(cached_tokens)

    def generated(self, tokens: int) -> None:
        self.generation_tokens.labels(self.model).inc(tokens)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        gauge = self.waiting_gauge.labels(self.model)
        gauge.inc()
        try:
            yield
        finally:
            gauge.dec()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        gauge = self.running_gauge.labels(self.model)
        gauge.inc()
        self._running += 1
        self._kv()
        try:
            yield
        finally:
            gauge.dec()
            self._running -= 1
            self._kv()

    def _kv(self) -> None:
        usage = self._running / self.max_batch if self.max_batch else 0.0
        self.kv_usage.labels(self.model).set(min(1.0, usage))

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
