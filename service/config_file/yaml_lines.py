"""YAML to plain data, remembering the line of every value, with ${ENV} expansion.

PyYAML's node tree carries positions; we build the Python values from it ourselves so that
each path (("probes", 0, "schedule", "every")) maps to its 1-based line, duplicate keys are
errors rather than silently last-wins, and `${NAME}` / `${NAME:-default}` in string scalars
are expanded from the environment: only names the ExpansionPolicy allows (any other is an
error on its line, default or not), and an unset variable without a default is an error. A
string that holds one of sustain's own credentials once expanded (`x-${A}${B}-y`, a URL with
the database password inside; see SecretPolicy.holds_forbidden) is an error too, naming the
field and the variables, never the value.

The input is bounded before anything is built: nesting deeper than MAX_DEPTH is refused from
the parser's event stream (PyYAML's composer recurses, so deep input would end in a
RecursionError), an alias that refers to itself is refused, and aliases may expand to at most
MAX_VALUES values in all ("billion laughs" files stop there instead of exhausting memory).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from sustain.service.policy.expansion import ExpansionPolicy

Path = tuple[str | int, ...]

STR_TAG = "tag:yaml.org,2002:str"
MAX_DEPTH = 64
"""Mappings and sequences nested deeper than this are refused (aliases included)."""
MAX_VALUES = 100_000
"""Values a file may expand to, aliases counted each time they are used."""
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
    problems: list[Problem] = field(default_factory=list)
    """Refused and unset variables: reported together with the validation's problems, so that
    one does not hide the others."""

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


class _TooLarge(Exception):
    """The file exceeds a structural bound; nothing more can be built from it."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


class _Builder:
    def __init__(self, environ: Mapping[str, str], expandable: ExpansionPolicy) -> None:
        self.environ = environ
        self.expandable = expandable
        self.lines: dict[Path, int] = {}
        self.problems: list[Problem] = []
        """Structural problems (keys): the data cannot be validated."""
        self.expansions: list[Problem] = []
        """Refused and unset variables: the data can still be validated."""
        self.values = 0
        self.building: set[int] = set()
        """Ids of the collection nodes being built: meeting one again is a recursive alias."""

    def build(self, node: yaml.Node, path: Path) -> Any:
        line = node.start_mark.line + 1
        self.values += 1
        if self.values > MAX_VALUES:
            raise _TooLarge(Problem(line, dotted(path), f"the file expands to more than "
                                    f"{MAX_VALUES:,} values (through aliases)"))
        if len(path) > MAX_DEPTH:
            raise _TooLarge(Problem(line, dotted(path[:MAX_DEPTH]),
                                    f"nested deeper than {MAX_DEPTH} levels (through aliases)"))
        if id(node) in self.building:
            raise _TooLarge(Problem(line, dotted(path), "an alias refers to a value that "
                                    "contains it (a recursive alias)"))
        self.lines[path] = line
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self.building.add(id(node))
            try:
                return self._collection(node, path)
            finally:
                self.building.discard(id(node))
        assert isinstance(node, yaml.ScalarNode)
        if node.tag == STR_TAG:
            return self.expand(str(node.value), path, line)
        return yaml.SafeLoader("").construct_object(node, deep=True)

    def _collection(self, node: yaml.MappingNode | yaml.SequenceNode, path: Path) -> Any:
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
        return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]

    def expand(self, text: str, path: Path, line: int) -> str:
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            refusal = self.expandable.refusal(name, self.environ)
            if refusal is not None:
                self.expansions.append(Problem(
                    line, dotted(path), f"environment variable {name} may not be expanded: "
                    f"{refusal}"))
                return ""
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            self.expansions.append(Problem(line, dotted(path),
                                           f"environment variable {name} is not set"))
            return ""
        expanded = ENV_REFERENCE.sub(replace, text)
        if self.expandable.secrets.holds_forbidden(expanded):
            names = sorted({m.group(1) for m in ENV_REFERENCE.finditer(text)})
            through = f" (expanded from {', '.join(names)})" if names else ""
            self.expansions.append(Problem(
                line, dotted(path), f"the value holds one of sustain's own credentials"
                f"{through}; not stored, not shown"))
            return ""
        return expanded


def _too_deep(text: str) -> Problem | None:
    """Nesting deeper than MAX_DEPTH, found from the parser's events (which do not recurse)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                return Problem(None if mark is None else mark.line + 1, "",
                               f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
    return None


def load(text: str, file: str, environ: Mapping[str, str],
         expandable: ExpansionPolicy) -> Located:
    """Parse YAML text, expanding from `environ` the variables `expandable` allows;
    ConfigError (with lines) for syntax errors, duplicate or non-string keys and files over
    the bounds. Refused and unset variables are kept in Located.problems for the caller to
    report with the validation's."""
    try:
        too_deep = _too_deep(text)
        if too_deep is not None:
            raise ConfigError(file, [too_deep])
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(file, [Problem(None if mark is None else mark.line + 1, "",
                                         f"not valid YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, [Problem(None, "", f"not valid YAML: {exc}")]) from None
    if node is None:
        return Located({}, {})
    builder = _Builder(environ, expandable)
    try:
        data = builder.build(node, ())
    except _TooLarge as exc:
        raise ConfigError(file, [exc.problem]) from None
    if builder.problems:
        raise ConfigError(file, [*builder.problems, *builder.expansions])
    return Located(data, builder.lines, builder.expansions)
