"""Request and response bodies, kept apart from the ORM models."""
