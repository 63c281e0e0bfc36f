"""`python -m service` is the `sustain` command."""

from service.cli import app

app()
