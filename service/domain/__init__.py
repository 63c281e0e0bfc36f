"""What is left of the service's shared value types: a sample as a `samples` row (rows) and a
run an agent uploads (run_upload), pure, beside `runs` (they import each other). Everything
else moved to the package of the concept it serves (access, policy, ticks, runs, ...)."""
