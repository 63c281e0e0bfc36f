"""Raw samples out of sustain: CSV (the API and `sustain export`) and Parquet (`sustain export`
with the `parquet` extra)."""
