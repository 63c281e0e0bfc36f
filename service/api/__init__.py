"""The REST API: routers (routes/), dependencies, auth, audit, paging and problem+json errors.
The request and response schemas live in service/schemas/."""
