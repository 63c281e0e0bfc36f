"""The REST API: routers, schemas, dependencies and problem+json errors."""
