"""`sustain serve` with no SUSTAIN_ADMIN_KEY on a database with no key: a newcomer's first
start. It says at start, in one WARNING line, that nobody can get in and the two ways in; the
sign-in page says the same; `sustain keys create` beside the running service is a way in, and
then the page is quiet and the printed key signs in. Real processes over loopback."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.processes import SustainProcess, free_port, wait_until

FORM = {"content-type": "application/x-www-form-urlencoded"}


def test_serve_without_an_admin_key_says_how_to_get_in(tmp_path: Path,
                                                       database_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    service = SustainProcess(["serve", "--port", str(port)], tmp_path / "serve.log",
                             env={"SUSTAIN_DATABASE_URL": database_url})
    service.env.pop("SUSTAIN_ADMIN_KEY")
    with service, httpx.Client(base_url=base, timeout=10) as anonymous:
        service.wait_http(f"{base}/readyz")
        warned = [line for line in service.output().splitlines()
                  if "nobody can get in yet" in line]
        assert len(warned) == 1, service.output()
        assert "WARNING" in warned[0]
        assert "sustain keys create --name admin --role admin" in warned[0]
        assert "set SUSTAIN_ADMIN_KEY (`sustain keys generate` prints a value)" in warned[0]

        assert anonymous.get("/api/v1/probes").status_code == 401
        assert anonymous.get("/").headers["location"] == "/login"
        assert 'id="no-key"' in anonymous.get("/login").text

        create = SustainProcess(["keys", "create", "--name", "admin", "--role", "admin"],
                                tmp_path / "keys.log", env={"SUSTAIN_DATABASE_URL": database_url})
        with create:
            assert create.proc is not None
            assert create.proc.wait(60) == 0, create.output()
        key = re.findall(r"^sk_sustain_\S+$", create.output(), re.MULTILINE)[-1]
        wait_until(lambda: 'id="no-key"' not in anonymous.get("/login").text, 10)
        signed_in = anonymous.post("/login", content=f"key={key}", headers=FORM)
        assert signed_in.status_code == 303, signed_in.text
        assert anonymous.get("/api/v1/probes",
                             headers={"Authorization": f"Bearer {key}"}).status_code == 200
