"""`sustain serve` on all interfaces with SUSTAIN_ANONYMOUS_READ=true starts, with a warning."""

from __future__ import annotations

from pathlib import Path

from tests.processes import SustainProcess, free_port


def test_serve_with_explicit_anonymous_reads_on_all_interfaces_starts_with_a_warning(
        tmp_path: Path, database_url: str) -> None:
    port = free_port()
    service = SustainProcess(["serve", "--host", "0.0.0.0", "--port", str(port)],
                             tmp_path / "serve.log",
                             env={"SUSTAIN_DATABASE_URL": database_url,
                                  "SUSTAIN_ANONYMOUS_READ": "true"})
    with service:
        service.wait_http(f"http://127.0.0.1:{port}/healthz")
        warnings = [line for line in service.output().splitlines()
                    if "WARNING" in line and "SUSTAIN_ANONYMOUS_READ=true" in line]
        assert warnings, service.output()
