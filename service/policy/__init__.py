"""What the operator allows, as plain values and pure checks: what probes and notifiers may
reach and read (reach), which environment variables a config file may expand (expansion), and
how much load one probe and all probes together may ask for, and how many objects may be
stored (limits). No I/O; the settings, the database, the config file, the API, the scheduler,
the agent and the notifiers above all import it, and each applies it where it acts."""
