"""OpenTelemetry export of what sustain measures (docs/opentelemetry.md): each finished run's
requests as GenAI client metrics (gen_ai.client.*) and, for a sampled share of them, spans
that carry the trace id the request's `traceparent` sent, over OTLP (gRPC or HTTP).

Configured as every OpenTelemetry SDK is, by the standard OTEL_* variables, and on only when
an OTLP endpoint is set (setup.py). Everything is recorded after a run, from its samples
(metrics.py, spans.py), never while requests are timed; the SDK's exporters send it from
their own threads, so a slow or failing collector never holds a run.

The OpenTelemetry SDK is the optional extra `otel`: only setup.py's `start_export`, once an
endpoint is set, imports the modules that need it.
"""
