"""`sustain keys`: API keys created (shown once), listed, revoked; an admin key generated."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from sustain.service import strict_json
from sustain.service.cli.common import (
    DataDirOpt,
    DbOpt,
    VerboseOpt,
    command_logging,
    console,
    database,
    load_settings,
    one_connection_engine,
    say,
)
from sustain.service.db.engine import session_factory
from sustain.service.db.migrate import upgrade_to_head

keys_app = typer.Typer(help="API keys: create (shown once), list, revoke; generate a "
                            "SUSTAIN_ADMIN_KEY value.", no_args_is_help=True)


async def _keys_call(url: str, action: str, **args: Any) -> Any:
    from sustain.service.db import keys as key_queries

    async with one_connection_engine(url) as engine, session_factory(engine)() as session:
        if action == "create":
            created = await key_queries.create(session, args["name"], args["role"], "cli",
                                               args["location"])
            await session.commit()
            return created
        if action == "revoke":
            row = await key_queries.revoke(session, args["key_id"], datetime.now(UTC))
            await session.commit()
            return key_queries.read(row)
        return [key_queries.read(k) for k in await key_queries.list_all(session)]


def _keys(action: str, database_url: str | None, data_dir: Path | None, verbose: bool,
          **args: Any) -> Any:
    from sustain.service.errors import ServiceError

    settings = load_settings(database_url=database_url, data_dir=data_dir)
    command_logging(settings, verbose)
    with database(settings, share=True) as url:
        upgrade_to_head(url)
        try:
            return asyncio.run(_keys_call(url, action, **args))
        except ServiceError as exc:
            say(f"{exc}", "red")
            raise typer.Exit(2) from None


FLAGS = {"name": "--name", "role": "--role", "location": "--location"}


def key_problems(name: str, role: str, location: str | None) -> list[str]:
    """What is wrong with `keys create`'s flags, each named as the user typed it (only the
    flags that are wrong)."""
    from sustain.service.access.keys import Role
    from sustain.service.schemas.keys import KeyCreate

    roles = [r.value for r in Role]
    if role not in roles:
        return [f"--role: {role!r} is not a role; one of {', '.join(roles)}"]
    try:
        KeyCreate(name=name, role=Role(role), location=location)
    except ValidationError as exc:
        out = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else str(
                (error.get("ctx") or {}).get("field", "location"))
            message = error["msg"].removeprefix("Value error, ")
            if field == "location" and "agent key" in message:
                message = ("an agent key needs --location (a DNS label such as eu-west-1); "
                           "the other roles take none")
            out.append(f"{FLAGS.get(field, '--' + field)}: {message}")
        return out
    return []


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="What the key is for (unique among active keys).")],
    role: Annotated[str, typer.Option(help="viewer | editor | admin | agent.")],
    location: Annotated[str | None, typer.Option(
        help="An agent key's location (required with --role agent).")] = None,
    database_url: DbOpt = None, data_dir: DataDirOpt = None, verbose: VerboseOpt = False,
) -> None:
    """Create a key and print it once (stdout); store it now, it cannot be shown again."""
    from sustain.service.access.keys import Role
    from sustain.service.schemas.keys import KeyCreate

    problems = key_problems(name, role, location)
    if problems:
        for problem in problems:
            console.print(problem, style="red", markup=False, highlight=False)
        raise typer.Exit(2)
    body = KeyCreate(name=name, role=Role(role), location=location)
    created = _keys("create", database_url, data_dir, verbose, name=body.name, role=body.role,
                    location=body.location)
    say(f"created key {created.id} {created.name!r} ({created.role.value}); it is shown once, "
        "below:")
    print(created.key)


def no_keys_yet() -> str:
    """What `keys list` prints when the database holds no key, revoked ones included (with
    --json: `[]`): the command that makes the first one."""
    from sustain.service.access.keys import Role

    return ("no API keys yet; create one with `sustain keys create --name admin --role "
            f"admin` (roles: {', '.join(r.value for r in Role)}; it prints the key once)")


@keys_app.command("list")
def keys_list(database_url: DbOpt = None, data_dir: DataDirOpt = None,
              json_output: Annotated[bool, typer.Option("--json")] = False,
              verbose: VerboseOpt = False) -> None:
    """Every key with its role, prefix and times; never the keys themselves."""
    found = _keys("list", database_url, data_dir, verbose)
    if json_output:
        print(strict_json.dumps([k.model_dump(mode="json") for k in found]))
        return
    if not found:  # an empty table tells a newcomer nothing; the next step does
        print(no_keys_yet())
        return
    table = Table("id", "name", "role", "prefix", "created", "last used", "revoked")
    for k in found:
        table.add_row(str(k.id), k.name, k.role.value, k.prefix,
                      f"{k.created_at:%Y-%m-%d %H:%M}",
                      f"{k.last_used_at:%Y-%m-%d %H:%M}" if k.last_used_at else "-",
                      f"{k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "-")
    Console(width=None if sys.stdout.isatty() else 140).print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[int, typer.Argument(help="The key's id (keys list).")],
                database_url: DbOpt = None, data_dir: DataDirOpt = None,
                verbose: VerboseOpt = False) -> None:
    """Revoke a key at once; its status-page sign-ins end too."""
    if not 1 <= key_id < 2**63:
        say("KEY_ID: not a key id", "red")
        raise typer.Exit(2)
    revoked = _keys("revoke", database_url, data_dir, verbose, key_id=key_id)
    say(f"revoked key {revoked.id} {revoked.name!r}")


@keys_app.command("generate")
def keys_generate() -> None:
    """Print a new random key for SUSTAIN_ADMIN_KEY (nothing is stored)."""
    from sustain.service.access.keys import generate_key

    print(generate_key())
