"""Alerts: the evaluation loop that moves their Postgres-backed state (service/db/alerts.py),
the drift findings it reads, and the notifiers that deliver what they owe: the delivery
worker, each kind's message and the HTTP send."""
