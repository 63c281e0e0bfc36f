"""Measuring in worker processes: processes that do nothing but send requests and time them,
so that what the rest of a program does (a service answering its API, a report being built)
can never make a figure wrong, and one run can use more than one core.

`pool` starts and replaces the processes, `child` is what runs in one, `conductor` drives a
run over one or more of them stage by stage, `shards` splits a stage (pure), and `wire` is
what crosses the pipe between them.
"""
