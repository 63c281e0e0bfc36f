"""Config as code: endpoints, workloads and probes declared in a YAML file kept in git,
validated with line numbers and synced to the database."""
