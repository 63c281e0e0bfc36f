"""An OpenAI-compatible fake endpoint with configurable latency and faults.

Used by `sustain demo`, the tests and the benchmarks. Imports neither `probes` nor `service`.
"""

# The folder simulator/ is installed as sustain.simulator; imported by its bare name from the
# repository root it would load a second copy of every module (two registries, two metadatas).
if __name__ != "sustain.simulator":
    raise ImportError(
        f"import sustain.simulator, not {__name__}: the repository's simulator/ folder is the "
        "package sustain.simulator (install it with `pip install -e .`)"
    )
