"""`python -m sustain` is the `sustain` command."""

from sustain.service.cli import main

main()
