"""sustain's measurement engine: protocol clients, load profiles, workloads and statistics.

A library with no database and no web framework; `service` builds on it.
"""
