"""sustain: continuous monitoring of LLM inference endpoints.

The one import root. The repository's top-level folders are its subpackages: `probes/` (the
measurement library), `simulator/`, `service/` and `migrations/` live at the top of the tree and
are installed as `sustain.probes`, `sustain.simulator`, `sustain.service` and
`sustain.migrations` (pyproject.toml's `package-dir`; no links). This folder holds only the
root package. See docs/architecture.md.
"""
