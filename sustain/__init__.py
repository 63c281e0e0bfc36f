"""sustain: continuous monitoring of LLM inference endpoints.

The one import root. The repository's top-level folders are its subpackages: `probes/` (the
measurement library), `simulator/`, `service/` and `migrations/` live at the top of the tree and
are mapped here as `sustain.probes`, `sustain.simulator`, `sustain.service` and
`sustain.migrations` (links in this folder; the wheel holds them as plain folders).
"""
