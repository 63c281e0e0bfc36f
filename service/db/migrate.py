"""Running Alembic from code: upgrade to head, and whether a database is at head."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


def alembic_config(database_url: str | None = None) -> Config:
    config = Config()
    # The scripts ship inside the package: found as a resource, never by a bare import.
    config.set_main_option("script_location", str(resources.files("sustain.migrations")))
    if database_url is not None:
        config.attributes["database_url"] = database_url
    return config


def upgrade_to_head(database_url: str) -> None:
    """Blocking; runs its own event loop, so call it from a thread when one is running."""
    command.upgrade(alembic_config(database_url), "head")


def upgrade_to(database_url: str, revision: str) -> None:
    """Blocking, like `upgrade_to_head`; for migration tests that stop at a revision."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade_to(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def known_revisions() -> set[str]:
    """Every revision this code ships."""
    return {r.revision for r in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


async def current_revision(connection: AsyncConnection) -> str | None:
    """The database's revision, None when it was never migrated."""
    if not await connection.scalar(text("SELECT to_regclass('alembic_version') IS NOT NULL")):
        return None
    revision = await connection.scalar(text("SELECT version_num FROM alembic_version"))
    return None if revision is None else str(revision)
