"""sustain's service: the REST API, scheduling, storage, alerting and the `sustain` command."""

# The folder service/ is installed as sustain.service; imported by its bare name from the
# repository root it would load a second copy of every module (two registries, two metadatas).
if __name__ != "sustain.service":
    raise ImportError(
        f"import sustain.service, not {__name__}: the repository's service/ folder is the "
        "package sustain.service (install it with `pip install -e .`)"
    )
