"""A flag model's fields as a command's options, so that one model names, types, defaults and
documents every flag of a command with many (`sustain probe`), and the command receives them
by name, checked once by the model. Likewise a config dataclass's settings that carry an
Option (`sustain simulate`'s, from SimulatorConfig): each setting is declared once, in the
config, and the command passes what it receives to it.

typer reads a command's parameters from its signature; `takes_flags(Model)` gives the command
`def command(**given)` a signature made of the model's fields, each annotated with the typer
Argument or Option its `Flag` describes; `takes_config(Config)` adds the config's flagged
settings to the command's own parameters.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from sustain.simulator.config import Option, options

Command = TypeVar("Command", bound=Callable[..., None])


@dataclass(frozen=True, slots=True)
class Flag:
    """How a flag-model field appears on the command line (its Annotated metadata)."""

    help: str
    names: tuple[str, ...] = ()
    """Explicit spellings (`--json`); by default typer derives `--field-name`."""
    argument: bool = False
    """A positional argument instead of an option."""
    typed_as: Any = None
    """What the command line takes where the field's own type differs (`--header` is typed
    as repeated text, the field holds the parsed mapping); its default is then None."""


def flag_of(model: type[BaseModel], name: str) -> Flag:
    """The Flag of one field; every field of a flag model has one."""
    field = model.model_fields[name]
    found = [m for m in field.metadata if isinstance(m, Flag)]
    if len(found) != 1:
        raise TypeError(f"{model.__name__}.{name} needs exactly one Flag")
    return found[0]


def command_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """The model's fields as a command's parameters, in field order (required ones first)."""
    parameters = []
    for name, field in model.model_fields.items():
        flag = flag_of(model, name)
        info = (typer.Argument(help=flag.help) if flag.argument
                else typer.Option(*flag.names, help=flag.help))
        if flag.typed_as is not None:
            annotation, default = flag.typed_as, None
        else:
            annotation = field.annotation
            default = (inspect.Parameter.empty if field.is_required()
                       else field.get_default(call_default_factory=True))
        parameters.append(inspect.Parameter(
            name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
            annotation=Annotated[annotation, info]))
    parameters.sort(key=lambda p: p.default is not inspect.Parameter.empty)
    return parameters


def takes_flags(model: type[BaseModel]) -> Callable[[Command], Command]:
    """Give `command(**given)` the model's fields as its parameters (what typer reads)."""

    def decorate(command: Command) -> Command:
        parameters = command_parameters(model)
        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            parameters, return_annotation=None)
        command.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
        return command

    return decorate


def config_option(name: str, option: Option) -> str:
    """How a config setting's flag is spelled (`--fault-rate`, `--prefix-cache`)."""
    return option.names[0].split("/")[0] if option.names else "--" + name.replace("_", "-")


def config_parameters(config: type[Any]) -> list[inspect.Parameter]:
    """A config dataclass's settings that have an Option as a command's options, in field
    order, each with the setting's type, default and help."""
    hints = typing.get_type_hints(config)
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    return [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=defaults[name], annotation=Annotated[
                                  hints[name], typer.Option(*option.names, help=option.help)])
            for name, option in options(config).items()]


def takes_config(config: type[Any]) -> Callable[[Command], Command]:
    """Give `command(own parameters..., **settings)` the config's flagged settings as further
    options (after its own), which typer passes by name in `settings`."""

    def decorate(command: Command) -> Command:
        hints = typing.get_type_hints(command, include_extras=True)
        own = [p.replace(annotation=hints[p.name])
               for p in inspect.signature(command).parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        parameters = [*own, *config_parameters(config)]
        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            parameters, return_annotation=None)
        command.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
        return command

    return decorate
