"""Workloads: what each request of a run asks for, built from a seed (synthetic
prompts, JSONL datasets, multi-turn sessions, replayed traces, token counting). Above client/
(a request is built for a Target) and measure/.
"""
