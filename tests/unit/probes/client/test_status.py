"""The one HTTP status table: 429, other 4xx and 5xx fail by status alone."""

from __future__ import annotations

import pytest

from sustain.probes.client.status import error_class_for_status
from sustain.probes.measure.sample import ErrorClass


@pytest.mark.parametrize(
    ("status", "expected"),
    [(200, None), (204, None), (302, None), (400, ErrorClass.HTTP_4XX),
     (404, ErrorClass.HTTP_4XX), (429, ErrorClass.HTTP_429), (500, ErrorClass.HTTP_5XX),
     (503, ErrorClass.HTTP_5XX)],
)
def test_status_classes(status: int, expected: ErrorClass | None) -> None:
    assert error_class_for_status(status) is expected
