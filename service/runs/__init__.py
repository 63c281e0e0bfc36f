"""What a run leaves, as plain values and pure functions: its final record (status, summary,
counts, sketches), its samples as `samples` rows, a run an agent uploads (checked field by
field), the closed sets a summary's names must come from wherever a name becomes a
metric label, the records of it a database refuses, and what to try after a request failed.
No I/O; the scheduler, the writer, the database, the exporter, the agent and the pages above
all import it."""
