"""The reference tables of docs/, rendered from the code they describe, so a setting or a flag
cannot be added, renamed or re-described without its page following.

- settings_table: docs/configuration.md's table, one row per Settings field (its variable,
  its default as the docs write it, its description);
- cli_reference: docs/cli.md's command reference, from the `sustain` command tree (each
  command's help and its arguments and options, as `--help` has them).

Tests (tests/unit/service/test_reference_docs.py) check that each page holds its table
verbatim. Both functions are pure: they read field and command metadata, never the
environment, so the tables are the same on every machine.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices
from pydantic.fields import FieldInfo

from sustain.service.bounds import format_default

DEFAULT_WORDS: Mapping[str, str] = {
    "data_dir": "per-user data dir (`~/.local/share/sustain` on Linux)",
    "replica_id": "`<hostname>-<pid>`",
    "measure_workers": "CPUs available (affinity, within the cgroup CPU quota)",
    "external_url": "`http://<host>:<port>`",
}
"""Defaults that depend on the machine (or on other settings), in words: the table must not
say the path or CPU count of the machine that rendered it."""


def plain(text: str) -> str:
    """`text` on one line, an asterisk outside a code span escaped (`SUSTAIN_*` in prose is
    no emphasis)."""
    spans = " ".join(text.split()).split("`")
    return "`".join(s if k % 2 else s.replace("*", "\\*") for k, s in enumerate(spans))


def cell(text: str) -> str:
    """`text` as one markdown table cell: plain, its pipes escaped."""
    return plain(text).replace("|", "\\|")


def default_words(name: str, field: FieldInfo) -> str:
    """A setting's default as the docs write it: unset, empty, `true`, 64 MiB, 30 s, 1,000."""
    if name in DEFAULT_WORDS:
        return DEFAULT_WORDS[name]
    if field.default_factory is not None:
        raise ValueError(f"{name}: a default_factory needs its words in DEFAULT_WORDS")
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | Path):
        return f"`{value}`" if str(value) else "empty"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return format_default(name, value).strip("`")


def choices(annotation: Any) -> tuple[str, ...]:
    """The values a Literal setting takes (none for any other type)."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is Literal:
            return tuple(str(v) for v in typing.get_args(arg))
    return ()


def former_variables(field: FieldInfo) -> tuple[str, ...]:
    """The deprecated variables a renamed setting is still read from: its AliasChoices after
    the first, its own (sustain.service.config.RENAMED_SETTINGS)."""
    alias = field.validation_alias
    if not isinstance(alias, AliasChoices):
        return ()
    return tuple(str(choice) for choice in alias.choices[1:])


def settings_table(fields: Mapping[str, FieldInfo]) -> str:
    """The settings table of docs/configuration.md: `fields` (Settings.model_fields), in
    declaration order, each as its variable, default and description."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for name, field in fields.items():
        if not field.description:
            raise ValueError(f"{name}: every setting needs a description")
        meaning = field.description
        if options := choices(field.annotation):
            meaning += " One of " + ", ".join(f"`{o}`" for o in options) + "."
        if former := former_variables(field):
            meaning += " Formerly " + ", ".join(f"`{v}`" for v in former) + \
                " (still read until the next release, with a warning at start)."
        rows.append(f"| `SUSTAIN_{name.upper()}` | {cell(default_words(name, field))} | "
                    f"{cell(meaning)} |")
    return "\n".join(rows) + "\n"


# --- the command line ---------------------------------------------------------------------


def option_default(param: Any) -> str:
    """An option's default as `--help` would show it; empty where it has none to show."""
    if getattr(param, "is_flag", False) or param.required:
        return ""
    value = param.default
    if value is None or callable(value) or value == () or value == []:
        return ""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def option_names(param: Any) -> str:
    """An argument's metavar, or an option's names (`--json`, `-o, --output`)."""
    if getattr(param, "param_type_name", "") == "argument":
        return f"`{(param.name or '').upper()}`"
    names = [*param.opts, *param.secondary_opts]
    return ", ".join(f"`{n}`" for n in names)


def option_choices(param: Any) -> tuple[str, ...]:
    """The values an option takes when its type is an Enum or a Literal (none otherwise)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, Enum):
            return tuple(str(member.value) for member in arg)
    return choices(annotation)


def option_help(param: Any) -> str:
    """An option's help with its choices, as `--help` lists them."""
    text = getattr(param, "help", None) or ""
    if options := option_choices(param):
        listed = ", ".join(f"`{o}`" for o in options)
        text = f"{text} One of {listed}.".strip()
    if param.required:
        text = f"Required. {text}".strip()
    return text


def commands(group: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Every leaf command under `group`, with its full name, in the order `--help` lists them."""
    for name, command in group.commands.items():
        if getattr(command, "hidden", False):
            continue
        full = f"{prefix} {name}"
        if hasattr(command, "commands"):
            yield from commands(command, full)
        else:
            yield full, command


def cli_reference(root: Any, name: str = "sustain") -> str:
    """The command reference of docs/cli.md: `root` (the Typer app's command,
    `typer.main.get_command(app)`), each command under a heading with its help and a table
    of its arguments and options."""
    parts: list[str] = []
    for full, command in commands(root, name):
        parts.append(f"### `{full}`\n")
        parts.append(plain(command.help or "") + "\n")
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            parts.append("| Argument or option | Default | |\n|---|---|---|")
            parts.extend(f"| {cell(option_names(p))} | {cell(option_default(p))} | "
                         f"{cell(option_help(p))} |" for p in params)
            parts.append("")
    return "\n".join(parts)
