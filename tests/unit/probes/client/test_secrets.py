"""Secret references resolve only where the operator's policy lets them point: allowed
environment variables (never sustain's own or the database's) and files under the secret
directory (links resolved; never /proc, /sys or /dev), read with a size cap. Errors name the
reference and the rule, never a value."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sustain.probes.client.secret_policy import SecretPolicy, own_credentials, parse_env_globs
from sustain.probes.client.secrets import (
    MAX_SECRET_BYTES,
    SecretRefusedError,
    SecretUnavailableError,
    resolve_secret,
)

DB_URL = "postgresql://sustain:pg-pass-0123@db:5432/sustain"


def env_policy(*globs: str) -> SecretPolicy:
    return SecretPolicy(env_globs=globs, forbidden_values=own_credentials(DB_URL))


def test_env_reference_reads_an_allowed_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", " sk-secret-value \n")
    assert resolve_secret("env:TEST_KEY", env_policy("TEST_KEY")) == "sk-secret-value"
    assert resolve_secret("env:TEST_KEY", env_policy("OTHER", "TEST_*")) == "sk-secret-value"


def test_file_reference_reads_a_file_under_the_secret_dir(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("sk-from-file\n")
    assert resolve_secret(f"file:{path}", SecretPolicy(secret_dir=tmp_path)) == "sk-from-file"


def test_a_mounted_kubernetes_secret_resolves_through_its_links(tmp_path: Path) -> None:
    """A Secret volume is `token -> ..data/token`, `..data -> ..2026_01_01_00_00_00.1`."""
    stamped = tmp_path / "..2026_01_01_00_00_00.1"
    stamped.mkdir()
    (stamped / "token").write_text("sk-mounted")
    (tmp_path / "..data").symlink_to(stamped.name)
    (tmp_path / "token").symlink_to("..data/token")
    assert resolve_secret(f"file:{tmp_path / 'token'}",
                          SecretPolicy(secret_dir=tmp_path)) == "sk-mounted"


def test_an_env_variable_not_in_the_allow_list_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME_SECRET", "sk-not-for-you")
    for policy in (SecretPolicy(), env_policy("OTHER_*")):
        with pytest.raises(SecretRefusedError) as caught:
            resolve_secret("env:HOME_SECRET", policy)
        assert str(caught.value) == "secret reference env:HOME_SECRET: not in SUSTAIN_SECRET_ENV"


@pytest.mark.parametrize("name", ["SUSTAIN_DATABASE_URL", "SUSTAIN_ADMIN_KEY", "SUSTAIN_X",
                                  "DATABASE_URL", "APP_DATABASE_URL", "PGPASSWORD",
                                  "POSTGRES_PASSWORD"])
def test_sustains_own_and_database_variables_are_never_readable(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "s3cret-value")
    policy = env_policy("*")
    assert policy.check(f"env:{name}") is not None
    with pytest.raises(SecretRefusedError, match="never readable") as caught:
        resolve_secret(f"env:{name}", policy)
    assert "s3cret-value" not in str(caught.value)


def test_a_variable_holding_the_database_url_or_its_password_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPY_OF_URL", DB_URL)
    monkeypatch.setenv("COPY_OF_PASSWORD", "pg-pass-0123\n")
    policy = env_policy("COPY_*")
    for ref in ("env:COPY_OF_URL", "env:COPY_OF_PASSWORD"):
        assert policy.check(ref, os.environ) == "the variable holds one of sustain's own " \
            "credentials"
        assert policy.check(ref) is None  # without the environment: the name alone passes
        with pytest.raises(SecretRefusedError) as caught:
            resolve_secret(ref, policy)
        assert "pg-pass" not in str(caught.value)


def test_own_credentials_are_the_values_and_a_urls_password() -> None:
    assert own_credentials(DB_URL, None, "", "sk_sustain_admin") == frozenset(
        {DB_URL, "pg-pass-0123", "sk_sustain_admin"})
    assert "p@ss" in own_credentials("postgresql://u:p%40ss@h/db")


def test_a_file_outside_the_secret_dir_is_refused(tmp_path: Path) -> None:
    allowed = tmp_path / "secrets"
    allowed.mkdir()
    outside = tmp_path / "token"
    outside.write_text("sk-outside")
    (allowed / "link").symlink_to(outside)
    policy = SecretPolicy(secret_dir=allowed)
    for ref in (f"file:{outside}", f"file:{allowed}/../token", f"file:{allowed}/link"):
        with pytest.raises(SecretRefusedError, match="not under SUSTAIN_SECRET_DIR") as caught:
            resolve_secret(ref, policy)
        assert "sk-outside" not in str(caught.value)


@pytest.mark.parametrize("path", ["/proc/self/environ", "/proc/1/cmdline", "/dev/zero",
                                  "/sys/kernel/uevent_seqnum"])
def test_system_files_are_never_readable_even_with_the_root_as_secret_dir(path: str) -> None:
    with pytest.raises(SecretRefusedError, match="never readable"):
        resolve_secret(f"file:{path}", SecretPolicy(secret_dir=Path("/")))


def test_a_link_in_the_secret_dir_to_proc_is_refused(tmp_path: Path) -> None:
    (tmp_path / "environ").symlink_to("/proc/self/environ")
    with pytest.raises(SecretRefusedError):
        resolve_secret(f"file:{tmp_path}/environ", SecretPolicy(secret_dir=tmp_path))


def test_without_a_secret_dir_no_file_is_readable(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sk")
    with pytest.raises(SecretRefusedError, match="not allowed"):
        resolve_secret(f"file:{tmp_path}/token", SecretPolicy())


def test_a_large_file_or_a_fifo_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"a" * (MAX_SECRET_BYTES + 1))
    policy = SecretPolicy(secret_dir=tmp_path)
    with pytest.raises(SecretUnavailableError, match="larger than"):
        resolve_secret(f"file:{big}", policy)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    caught: list[Exception] = []

    def read() -> None:
        try:
            resolve_secret(f"file:{fifo}", policy)
        except SecretUnavailableError as exc:
            caught.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive()
    assert "not a regular file" in str(caught[0])


def test_missing_secret_error_names_the_reference_only(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.delenv("TEST_ABSENT", raising=False)
    with pytest.raises(SecretUnavailableError, match="env:TEST_ABSENT: environment variable "
                       "not set"):
        resolve_secret("env:TEST_ABSENT", env_policy("TEST_*"))
    with pytest.raises(SecretUnavailableError, match="cannot read"):
        resolve_secret(f"file:{tmp_path}/nonexistent", SecretPolicy(secret_dir=tmp_path))


def test_a_file_holding_the_database_url_is_refused(tmp_path: Path) -> None:
    (tmp_path / "url").write_text(DB_URL + "\n")
    policy = SecretPolicy(secret_dir=tmp_path, forbidden_values=own_credentials(DB_URL))
    with pytest.raises(SecretRefusedError, match="own credentials"):
        resolve_secret(f"file:{tmp_path}/url", policy)


def test_malformed_reference_is_never_echoed() -> None:
    with pytest.raises(SecretUnavailableError) as info:
        resolve_secret("sk-live-pasted-key-by-mistake", env_policy("*"))
    assert "sk-live" not in str(info.value)


@pytest.mark.parametrize("value", ["sk-abc\r\nX-Injected: 1", "sk-abc\nX", "sk\x00abc",
                                   "sk\x1babc", "sk\x7fabc"])
def test_a_value_with_control_characters_is_refused_naming_only_the_reference(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str) -> None:
    path = tmp_path / "token"
    path.write_text(value)
    refs = [f"file:{path}"]
    if "\x00" not in value:  # the environment cannot hold NUL; a file can
        monkeypatch.setenv("TEST_SMUGGLED", value)
        refs.append("env:TEST_SMUGGLED")
    policy = SecretPolicy(env_globs=("TEST_*",), secret_dir=tmp_path)
    for ref in refs:
        with pytest.raises(SecretUnavailableError, match="control characters") as info:
            resolve_secret(ref, policy)
        assert ref in str(info.value)
        assert "abc" not in str(info.value)
        assert "Injected" not in str(info.value)


def test_env_globs_are_names_and_wildcards_only() -> None:
    assert parse_env_globs(" OPENAI_API_KEY, SIM_* ,,") == ("OPENAI_API_KEY", "SIM_*")
    with pytest.raises(ValueError, match="'a b'"):
        parse_env_globs("OK,a b")
    with pytest.raises(ValueError, match="'x=y'"):
        parse_env_globs("x=y")
