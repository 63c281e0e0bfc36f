"""PostgreSQL storage: models, engine, migrations, the embedded default, and queries."""
