"""Alembic environment and revisions: the only way the schema changes."""

# The folder migrations/ is installed as sustain.migrations; imported by its bare name from the
# repository root it would load a second copy of every module (two registries, two metadatas).
if __name__ != "sustain.migrations":
    raise ImportError(
        f"import sustain.migrations, not {__name__}: the repository's migrations/ folder is the "
        "package sustain.migrations (install it with `pip install -e .`)"
    )
