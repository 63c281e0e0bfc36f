"""`sustain serve` refuses anonymous reads on an address other machines reach unless
SUSTAIN_ANONYMOUS_READ=true says so."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sustain.service.cli import app


@pytest.mark.parametrize("value", ["1", "yes", "on"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3"])
def test_serve_refuses_anonymous_reads_beyond_loopback_unless_explicit(host: str,
                                                                       value: str) -> None:
    result = CliRunner().invoke(app, ["serve", "--host", host],
                                env={"SUSTAIN_ANONYMOUS_READ": value,
                                     "SUSTAIN_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"})
    assert result.exit_code == 2
    assert "SUSTAIN_ANONYMOUS_READ=true" in " ".join(result.output.split())


def test_counts_read_in_the_right_number() -> None:
    from sustain.service.cli.common import counted

    assert [counted(n, "probe") for n in (0, 1, 2, 1200)] == [
        "0 probes", "1 probe", "2 probes", "1,200 probes"]
    assert counted(1, "SLO") == "1 SLO"
