"""`sustain keys` on the database directly: create prints the key once, list never shows it,
revoke ends it, and a bad role is refused before anything is written."""

from __future__ import annotations

import json
import re
import subprocess

from tests.processes import sustain_command

KEY = re.compile(r"^sk_sustain_[A-Za-z0-9_-]{43}$")


def keys(*args: str, database_url: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--database-url", database_url] if database_url else []
    return subprocess.run([*sustain_command(), "keys", *args, *extra], capture_output=True,
                          text=True, timeout=60, check=False)


def test_keys_are_created_listed_and_revoked_from_the_command_line(database_url: str) -> None:
    created = keys("create", "--name", "prometheus", "--role", "viewer",
                   database_url=database_url)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert KEY.match(key)
    assert key not in created.stderr

    listed = keys("list", "--json", database_url=database_url)
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)
    assert (entry["name"], entry["role"], entry["revoked_at"]) == ("prometheus", "viewer", None)
    assert entry["prefix"] == key[:17]
    assert key not in listed.stdout

    revoked = keys("revoke", str(entry["id"]), database_url=database_url)
    assert revoked.returncode == 0, revoked.stderr
    (entry,) = json.loads(keys("list", "--json", database_url=database_url).stdout)
    assert entry["revoked_at"] is not None
    assert keys("revoke", "999999", database_url=database_url).returncode == 2


def test_a_bad_role_is_refused_and_nothing_is_written(database_url: str) -> None:
    refused = keys("create", "--name", "x", "--role", "root", database_url=database_url)
    assert refused.returncode == 2
    assert "--role" in refused.stderr
    assert json.loads(keys("list", "--json", database_url=database_url).stdout) == []


def test_generate_prints_a_fresh_key_each_time() -> None:
    first, second = keys("generate").stdout.strip(), keys("generate").stdout.strip()
    assert KEY.match(first)
    assert KEY.match(second)
    assert first != second


def test_each_refusal_names_only_the_flag_that_is_wrong(database_url: str) -> None:
    role = keys("create", "--name", "ok-name", "--role", "superuser",
                database_url=database_url)
    assert role.returncode == 2
    assert "--role: 'superuser' is not a role; one of viewer, editor, admin, agent" in \
        role.stderr
    assert "--name" not in role.stderr
    name = keys("create", "--name", "", "--role", "viewer", database_url=database_url)
    assert name.returncode == 2
    assert "--name:" in name.stderr
    assert "--role" not in name.stderr
    agent = keys("create", "--name", "edge", "--role", "agent", database_url=database_url)
    assert agent.returncode == 2
    assert "--location: an agent key needs --location" in agent.stderr
    assert "--name" not in agent.stderr
    assert json.loads(keys("list", "--json", database_url=database_url).stdout) == []
