"""The whole `sustain` command: every command group assembled into one Typer app (what
`sustain --help` lists, and what the tests drive through Typer's runner)."""

import typer

from sustain.service.cli import HELP
from sustain.service.cli.admin import migrate, rules, validate
from sustain.service.cli.agent import agent
from sustain.service.cli.common import guarded, help_texts, register
from sustain.service.cli.compare import compare
from sustain.service.cli.export import export
from sustain.service.cli.keys import keys_app
from sustain.service.cli.probe import probe
from sustain.service.cli.serve import demo, serve
from sustain.service.cli.simulate import simulate

app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False)
for command in (serve, rules, validate, migrate, demo, probe, simulate, export, compare,
                agent):
    register(app, command)
for sub in keys_app.registered_commands:
    if sub.callback is not None:
        sub.help, sub.short_help = help_texts(sub.callback.__doc__)
        sub.callback = guarded(sub.callback)
app.add_typer(keys_app, name="keys")
