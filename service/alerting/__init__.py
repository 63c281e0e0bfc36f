"""Alerts: their Postgres-backed state, the evaluation loop that moves them, and (later) the
notifiers that deliver what they owe."""
