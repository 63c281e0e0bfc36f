"""When and where a probe's ticks run: its schedule (every N seconds or a cron expression,
with derived jitter) and the locations it runs from, one run per tick in each. Pure; below
every layer that names them (the database models, the settings, the schemas, the SLO
evaluation, the scheduler, the agent)."""
