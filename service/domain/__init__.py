"""Value types and pure functions the service's layers share: no I/O, no database, no web.
Everything above (db, ingest, scheduling, alerting, api, web, cli) may import it."""
