"""The `sustain` command: one module per command group, assembled in commands.py.

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

The console script (`main`) builds only the command it is asked for when that one stands
alone (`sustain simulate ...`, started by tests, demos and compose stacks many times, imports
the simulator, not the service); `sustain --help`, `keys` and anything else get the whole app
(commands.py).
"""

import sys
from typing import Any

HELP = "sustain: continuous monitoring of LLM inference endpoints."
"""The command's own help, above its list of commands."""
ALONE = {"simulate": "sustain.service.cli.simulate"}
"""Commands the console script builds on their own, by name -> the module holding the
command function of that name (a module that imports nothing of the service when loaded)."""


def main() -> None:
    """The `sustain` console script."""
    name = sys.argv[1] if len(sys.argv) > 1 else None
    if name in ALONE:
        import importlib

        import typer

        from sustain.service.cli.common import register

        one = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        one.callback(help=HELP)(_root)
        register(one, getattr(importlib.import_module(ALONE[name]), name))
        one(prog_name="sustain")
        return
    from sustain.service.cli.commands import app

    app(prog_name="sustain")


def _root() -> None:
    """The group above a command built alone (its help is HELP)."""


def __getattr__(name: str) -> Any:
    """`sustain.service.cli.app`, the whole command, assembled when first asked for."""
    if name == "app":
        from sustain.service.cli.commands import app

        return app
    raise AttributeError(name)
