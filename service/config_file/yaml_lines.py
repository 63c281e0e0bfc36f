"""YAML to plain data, remembering the line of every value, with ${ENV} expansion.

PyYAML's node tree carries positions; we build the Python values from it ourselves so that
each path (("probes", 0, "schedule", "every")) maps to its 1-based line, duplicate keys are
errors rather than silently last-wins, and `${NAME}` / `${NAME:-default}` in string scalars
are expanded from the environment (an unset variable without a default is an error).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]

STR_TAG = "tag:yaml.org,2002:str"
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Problem:
    line: int | None
    field: str
    message: str


class ConfigError(Exception):
    """A file that cannot be used; every problem found, each with its line."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [f"{self.file}:{p.line if p.line is not None else '?'}: "
                f"{p.field + ': ' if p.field else ''}{p.message}" for p in self.problems]


@dataclass
class Located:
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int | None:
        """The line of the value at `path`, or of its nearest ancestor that has one."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _Builder:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.lines: dict[Path, int] = {}
        self.problems: list[Problem] = []

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if not isinstance(key, str):
                    self.problems.append(Problem(key_node.start_mark.line + 1, dotted(path),
                                                 "keys must be plain strings"))
                    continue
                if key in out:
                    self.problems.append(Problem(key_node.start_mark.line + 1,
                                                 dotted((*path, key)), "duplicate key"))
                    continue
                out[key] = self.build(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)
        if node.tag == STR_TAG:
            return self.expand(str(node.value), path, node.start_mark.line + 1)
        return yaml.SafeLoader("").construct_object(node, deep=True)

    def expand(self, text: str, path: Path, line: int) -> str:
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            self.problems.append(Problem(line, dotted(path),
                                         f"environment variable {name} is not set"))
            return ""
        return ENV_REFERENCE.sub(replace, text)


def load(text: str, file: str, environ: Mapping[str, str]) -> Located:
    """Parse YAML text; ConfigError (with lines) for syntax errors, duplicate keys and unset
    variables."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(file, [Problem(None if mark is None else mark.line + 1, "",
                                         f"not valid YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, [Problem(None, "", f"not valid YAML: {exc}")]) from None
    if node is None:
        return Located({}, {})
    builder = _Builder(environ)
    data = builder.build(node, ())
    if builder.problems:
        raise ConfigError(file, builder.problems)
    return Located(data, builder.lines)
