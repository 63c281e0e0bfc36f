"""An OpenAI-compatible fake endpoint with configurable latency and faults.

Used by `sustain demo`, the tests and the benchmarks. Imports neither `probes` nor `service`.
"""
