"""Samples and the statistics over them, all pure: a Sample and its error classes,
exact percentiles and their confidence bounds, sketches, run summaries, steady state, capacity
verdicts and the Pareto front, efficiency, goodput thresholds, quality-canary expectations and
scoring, and server-metric summaries. The bottom layer of the library: it imports none of the
others (docs/metrics.md defines every figure).
"""
