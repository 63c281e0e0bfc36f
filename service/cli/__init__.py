"""The `sustain` command: one module per command group, assembled here.

- serve.py: `serve`, `demo` (its simulators and objects are sustain.service.demo's, the
  graceful uvicorn sustain.service.server's);
- probe.py: `probe`, its flags (probe_flags.py) made a one-shot run (oneshot.py; the run
  itself is sustain.service.scheduling.one_shot's); flags.py turns a flag model, or a
  config's flagged fields (`simulate`'s), into a command's options;
- admin.py: `validate`, `migrate`, `rules`;
- export.py, compare.py, simulate.py, keys.py, agent.py: one command (group) each;
- common.py: the console, shared options, settings, the database and serving.

Only commands, their flags and what they share live here. Commands import what they use when
they run, so that `sustain --help` stays fast.
"""

import typer

from sustain.service.cli.admin import migrate, rules, validate
from sustain.service.cli.agent import agent
from sustain.service.cli.common import guarded, help_texts
from sustain.service.cli.compare import compare
from sustain.service.cli.export import export
from sustain.service.cli.keys import keys_app
from sustain.service.cli.probe import probe
from sustain.service.cli.serve import demo, serve
from sustain.service.cli.simulate import simulate

app = typer.Typer(
    help="sustain: continuous monitoring of LLM inference endpoints.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
for command in (serve, rules, validate, migrate, demo, probe, simulate, export, compare,
                agent):
    long_help, short_help = help_texts(command.__doc__)
    app.command(help=long_help, short_help=short_help)(guarded(command))
for sub in keys_app.registered_commands:
    if sub.callback is not None:
        sub.help, sub.short_help = help_texts(sub.callback.__doc__)
        sub.callback = guarded(sub.callback)
app.add_typer(keys_app, name="keys")
