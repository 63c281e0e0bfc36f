"""APScheduler wiring and run execution."""
