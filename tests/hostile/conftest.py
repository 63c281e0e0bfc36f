"""The hostile suite: one test per way a caller tried to knock the service over, each
asserting what bounds it (RSS, open fds, partitions, series, locks, rows, status codes),
never a wall-clock time. The app runs on a private database, as in the integration suite."""

from __future__ import annotations

from tests.integration.service.conftest import api, app, engine

__all__ = ["api", "app", "engine"]
