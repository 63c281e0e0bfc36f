"""`sustain validate`, `sustain migrate` and `sustain rules`: a config file checked, the schema
upgraded, and Prometheus rules for the SLOs."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sustain.service.cli.common import (
    ConfigOpt,
    DataDirOpt,
    DbOpt,
    VerboseOpt,
    check_config,
    command_logging,
    console,
    database,
    load_settings,
    one_connection_engine,
    say,
)
from sustain.service.db.engine import safe_url, session_factory
from sustain.service.db.migrate import upgrade_to_head

if TYPE_CHECKING:  # imported where used, so that `sustain --help` stays fast
    from sustain.service.evaluation.rules import SloRules


async def _slo_rules_from_database(url: str) -> list[SloRules]:
    from sqlalchemy import select

    from sustain.service.db.models import Slo
    from sustain.service.db.slos import tiers_of
    from sustain.service.evaluation.rules import SloRules

    async with one_connection_engine(url) as engine, session_factory(engine)() as session:
        rows = (await session.execute(select(Slo).order_by(Slo.name))).scalars().all()
        return [SloRules(s.name, s.objective, tiers_of(s), s.description) for s in rows]


def rules(config: ConfigOpt = None, database_url: DbOpt = None,
          data_dir: DataDirOpt = None, verbose: VerboseOpt = False) -> None:
    """Print Prometheus recording and alerting rules for the SLOs (of the config file, else
    of the database): multi-window, multi-burn-rate over sustain_slo_events_total."""
    import yaml

    from sustain.service.config_file.load import read
    from sustain.service.config_file.yaml_lines import ConfigError
    from sustain.service.evaluation.rules import SloRules, rules_document

    settings = load_settings(database_url=database_url, data_dir=data_dir)
    command_logging(settings, verbose)
    if config is not None:
        try:
            parsed, _ = read(config, expandable=settings.config_expansion())
        except ConfigError as exc:
            for line in exc.lines():
                console.print(line, markup=False, highlight=False)
            raise typer.Exit(2) from None
        slos = [SloRules(s.name, s.objective, s.tiers, s.description) for s in parsed.slos]
    else:
        with database(settings, share=True) as url:
            slos = asyncio.run(_slo_rules_from_database(url))
    sys.stdout.write(yaml.safe_dump(rules_document(slos), sort_keys=False, width=1000))


def validate(path: Annotated[Path, typer.Argument(help="The YAML config file.")]) -> None:
    """Check a config file: every problem with its line; exit 1 if there is any. Probe
    profiles, secret references, datasets, URLs and `${NAME}` expansions are checked against
    this environment's SUSTAIN_* settings (SUSTAIN_MAX_RATE, SUSTAIN_SECRET_ENV,
    SUSTAIN_CONFIG_ENV, ...), so run it with the service's."""
    if not check_config(path, load_settings()):
        raise typer.Exit(1)


def migrate(database_url: DbOpt = None, data_dir: DataDirOpt = None,
            verbose: VerboseOpt = False) -> None:
    """Upgrade the database schema to the newest revision."""
    settings = load_settings(database_url=database_url, data_dir=data_dir)
    command_logging(settings, verbose)
    with database(settings, share=True) as url:
        upgrade_to_head(url)
    say(f"database {safe_url(url)} is at the newest revision")
