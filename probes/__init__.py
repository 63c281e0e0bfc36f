"""sustain's measurement library: protocol clients, workloads, load profiles and statistics.

A library with no database and no web framework; `service` builds on it. Its layers, each
importing only those below (checked by `lint-imports`; docs/architecture.md draws them):

- report.py, report_tables.py: a run's JSON and table reports;
- workers/: runs spread over measurement processes;
- runner.py: one run in this process (stages, summaries, telemetry, efficiency);
- load/ and telemetry/: load profiles, their plans and drivers, and the sender of each API
  kind; the server-metrics scraper beside a run;
- workload/: what each request asks for (prompts, datasets, sessions, traces);
- client/: protocol and transport clients that send one request and measure it;
- measure/: samples and the pure statistics over them;
- inputs.py, local_files.py, regex.py, log_lines.py: shared leaves.
"""

# The folder probes/ is installed as sustain.probes; imported by its bare name from the
# repository root it would load a second copy of every module (two registries, two metadatas).
if __name__ != "sustain.probes":
    raise ImportError(
        f"import sustain.probes, not {__name__}: the repository's probes/ folder is the "
        "package sustain.probes (install it with `pip install -e .`)"
    )
