"""What every command shares: the console, common options, settings from the environment
and flags, the database (configured or embedded) and serving the app."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import typer
from rich.console import Console

if TYPE_CHECKING:  # the service is imported when a command runs, not when the CLI is built
    from sqlalchemy.ext.asyncio import AsyncEngine

    from sustain.service.config import Settings

console = Console(stderr=True, soft_wrap=True, emoji=False)
"""Messages go to stderr, so a command's stdout carries only its output (--json, keys)."""


def say(text: str, style: str | None = None) -> None:
    """A message on stderr exactly as written: what it echoes of the user's (names, paths,
    values, a file's lines) is never read as markup, highlighting or emoji codes."""
    console.print(text, style=style, markup=False, highlight=False, emoji=False)

VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Also log what the command does (INFO): the database, migrations.")]


def command_logging(settings: Settings, verbose: bool) -> None:
    """A one-shot command logs only warnings and errors (its output is what it prints),
    unless --verbose (or SUSTAIN_LOG_LEVEL=DEBUG)."""
    from sustain.service.logging import configure_logging

    level = settings.log_level if verbose or settings.log_level.upper() == "DEBUG" \
        else "WARNING"
    configure_logging(level, settings.log_format)
    warn_deprecated_variables()


def warn_deprecated_variables() -> None:
    """Log a warning for each deprecated SUSTAIN_ variable set (still read until the next
    release: sustain.service.config.RENAMED_SETTINGS); once logging is configured."""
    from sustain.service.server_settings import deprecated_variables

    for note in deprecated_variables(os.environ):
        logging.getLogger("sustain.service.config").warning("%s", note)


HostOpt = Annotated[str | None, typer.Option(help="Bind address (env SUSTAIN_HOST).")]
PortOpt = Annotated[int | None, typer.Option(help="Bind port (env SUSTAIN_PORT).")]
DbOpt = Annotated[str | None, typer.Option(
    "--database-url", help="PostgreSQL URL; unset: embedded (env SUSTAIN_DATABASE_URL).")]
DataDirOpt = Annotated[Path | None, typer.Option(help="Data directory (env SUSTAIN_DATA_DIR).")]
LogLevelOpt = Annotated[str | None, typer.Option(help="debug|info|warning|error.")]
LogFormatOpt = Annotated[str | None, typer.Option(help="text|json.")]

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="YAML config file synced to the database (env SUSTAIN_CONFIG).")]

def load_settings(**overrides: Any) -> Settings:
    """Environment first, then the flags that were given."""
    from pydantic import ValidationError

    from sustain.service.config import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]).upper()
            variable = field if field.startswith("SUSTAIN_") else f"SUSTAIN_{field}"
            say(f"invalid setting {variable}: {error['msg']}", "red")
        raise typer.Exit(2) from None


def _terminate(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - signal handler
    raise SystemExit(0)


@contextmanager
def database(settings: Settings, share: bool = False) -> Iterator[str]:
    """The configured database, or an embedded one that lives as long as this block. With
    `share` (the one-shot commands), a data directory another sustain process holds (`sustain
    demo`, `serve`) is not an error: its running server is used, over its socket.

    SIGTERM becomes SystemExit so the embedded server is stopped on the way out (uvicorn
    re-raises the signal it caught after its own graceful shutdown).
    """
    from sustain.service.db.embedded import DataDirInUseError, EmbeddedPostgres, running_url

    signal.signal(signal.SIGTERM, _terminate)
    if settings.database_url is not None:
        yield settings.database_url
        return
    embedded = EmbeddedPostgres(settings.data_dir)
    try:
        url = embedded.start()
    except DataDirInUseError as exc:
        running = running_url(settings.data_dir) if share else None
        if running is None:
            say(f"{exc}", "red")
            raise typer.Exit(2) from None
        say(f"using the embedded PostgreSQL of the sustain process that holds "
            f"{settings.data_dir}")
        yield running
        return
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        embedded.stop()


@asynccontextmanager
async def one_connection_engine(url: str) -> AsyncIterator[AsyncEngine]:
    """An engine with one pooled connection, for a command's few statements; disposed after."""
    from sustain.service.db.engine import create_engine

    engine = create_engine(url, pool_size=1)
    try:
        yield engine
    finally:
        await engine.dispose()


def serve_app(settings: Settings, url: str) -> None:
    """Serve the app on settings.host:port until SIGTERM or Ctrl-C (graceful)."""
    from sustain.service.app import create_app
    from sustain.service.http_protocol import guarded_config
    from sustain.service.server import GracefulServer

    app = create_app(settings, url)
    server = GracefulServer(guarded_config(
        app, settings, host=settings.host, port=settings.port,
        log_config=None, access_log=False, timeout_graceful_shutdown=10,
    ), app)
    with suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise typer.Exit(1)


def check_config(path: Path, settings: Settings) -> bool:
    """Print every problem of the file (file:line: field: message), probe profiles beyond the
    load limits of `settings` and what its secret, dataset, egress and `${NAME}` expansion
    (SUSTAIN_CONFIG_ENV) policies refuse included; whether it is valid."""
    from sustain.service.config_file.load import read
    from sustain.service.config_file.yaml_lines import ConfigError

    try:
        config, _ = read(path, limits=settings.load_limits(), reach=settings.reach(),
                         expandable=settings.config_expansion())
    except ConfigError as exc:
        for line in exc.lines():
            console.print(line, markup=False, highlight=False)
        return False
    counts = ", ".join(counted(len(items), word) for items, word in (
        (config.endpoints, "endpoint"), (config.workloads, "workload"),
        (config.probes, "probe"), (config.slos, "SLO"), (config.notifiers, "notifier")))
    console.print(f"{path}: ok ({counts})", markup=False, highlight=False)
    return True


def counted(n: int, word: str) -> str:
    """`1 probe`, `2 probes`, `0 SLOs`: a count with its noun in the right number."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.(?=\s|$)")


def register(app: typer.Typer, command: Callable[..., None]) -> None:
    """Add a command to `app`, its help from its docstring, its database errors said in one
    line (guarded)."""
    long_help, short_help = help_texts(command.__doc__)
    app.command(help=long_help, short_help=short_help)(guarded(command))


def help_texts(doc: str | None) -> tuple[str, str]:
    """A command's help from its docstring: each paragraph on one line (the terminal wraps
    it, never the source's line breaks), and its first sentence for the list of commands:
    (help, short_help)."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n")]
    full = "\n\n".join(p for p in paragraphs if p)
    end = _SENTENCE_END.search(full)
    return full, full[:end.end()] if end else full.split("\n")[0]


P = ParamSpec("P")
EXIT_DATABASE = 1
"""A command could not use its database (nothing listening, no such database, refused)."""
_CLASS_PREFIX = re.compile(r"^<class '[\w.]+'>: ")


def database_problem(exc: BaseException) -> str:
    """What the database (or the way to it) said, in one line, without the library's
    class names or its link to background reading."""
    from sqlalchemy.exc import DBAPIError

    origin = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = _CLASS_PREFIX.sub("", str(origin).strip()).splitlines()
    return text[0] if text else type(origin).__name__


def _database_error(exc: Exception) -> bool:
    """Whether `exc` says the database cannot be used (not a bug)."""
    from sqlalchemy.exc import DBAPIError

    return isinstance(exc, DBAPIError | ConnectionRefusedError | socket.gaierror)


def guarded(command: Callable[P, None]) -> Callable[P, None]:
    """The command, saying in one line why its database cannot be used (a wrong name,
    refused credentials, nothing listening) and exiting with EXIT_DATABASE, instead of a
    traceback. Other errors are bugs, and keep theirs."""
    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            command(*args, **kwargs)
        except Exception as exc:
            if not _database_error(exc):
                raise
            say("cannot use the database (SUSTAIN_DATABASE_URL or --database-url): "
                + database_problem(exc), "red")
            raise typer.Exit(EXIT_DATABASE) from None
    return run
