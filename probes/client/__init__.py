"""Protocol adapters: send one request to an endpoint and measure it (a Sample's
Measurement), by protocol, then transport. Above measure/; below workload/ and load/.

- target.py: the endpoint as plain data (ApiKind, HttpCheck, Target);
- secrets.py: auth references resolved at request time; secret_policy.py: which references may
  be resolved;
- egress.py: which hosts may be reached (a pure value); egress_connect.py: connecting only there;
- status.py: the one HTTP status -> error class table; sse.py: the server-sent-events decoder
  (what each API kind's requests and answers are is probes/protocols, beside this package);
- http1_pool.py: the lean HTTP/1.1 connection pool; http1.py: measured API requests over it
  (the default);
- httpx_transport.py: measured API requests over httpx (HTTP/2 endpoints) and httpx failures
  as error classes;
- http_check.py: plain `http` checks over httpx;
- phases.py: a request's HTTP phases (DNS, connect, TLS, TTFB) as both transports time them;
  trace_context.py: the W3C traceparent every request carries;
- clients.py: the connections a process shares (HttpClients).

Which sender measures a target (by its protocol's request form) is load/senders.py.
"""
