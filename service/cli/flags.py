"""A flag model's fields as a command's options, so that one model names, types, defaults and
documents every flag of a command with many (`sustain probe`), and the command receives them
by name, checked once by the model.

typer reads a command's parameters from its signature; `takes_flags(Model)` gives the command
`def command(**given)` a signature made of the model's fields, each annotated with the typer
Argument or Option its `Flag` describes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

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
