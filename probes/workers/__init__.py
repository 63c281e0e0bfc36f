"""Measuring in worker processes: processes that do nothing but send requests and time them,
so that what the rest of a program does (a service answering its API, a report being built)
can never make a figure wrong, and one run can use more than one core.

`pool` starts, leases and replaces the processes and measures a run in them through
`conductor`, which drives the run stage by stage over each process's `RunChannel` (`process`);
`child` is what runs in one, `shards` splits a stage (pure), and `wire` is what crosses the
pipe between them.
"""
