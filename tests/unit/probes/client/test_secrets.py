from __future__ import annotations

from pathlib import Path

import pytest

from sustain.probes.client.secrets import SecretUnavailableError, resolve_secret


def test_env_reference_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUSTAIN_TEST_KEY", " sk-secret-value \n")
    assert resolve_secret("env:SUSTAIN_TEST_KEY") == "sk-secret-value"


def test_file_reference_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("sk-from-file\n")
    assert resolve_secret(f"file:{path}") == "sk-from-file"


def test_missing_secret_error_names_the_reference_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUSTAIN_ABSENT", raising=False)
    with pytest.raises(SecretUnavailableError, match="env:SUSTAIN_ABSENT"):
        resolve_secret("env:SUSTAIN_ABSENT")
    with pytest.raises(SecretUnavailableError, match="cannot read"):
        resolve_secret("file:/nonexistent/sustain/token")


def test_malformed_reference_is_never_echoed() -> None:
    with pytest.raises(SecretUnavailableError) as info:
        resolve_secret("sk-live-pasted-key-by-mistake")
    assert "sk-live" not in str(info.value)


@pytest.mark.parametrize("value", ["sk-abc\r\nX-Injected: 1", "sk-abc\nX", "sk\x00abc",
                                   "sk\x1babc", "sk\x7fabc"])
def test_a_value_with_control_characters_is_refused_naming_only_the_reference(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str) -> None:
    path = tmp_path / "token"
    path.write_text(value)
    refs = [f"file:{path}"]
    if "\x00" not in value:  # the environment cannot hold NUL; a file can
        monkeypatch.setenv("SUSTAIN_TEST_SMUGGLED", value)
        refs.append("env:SUSTAIN_TEST_SMUGGLED")
    for ref in refs:
        with pytest.raises(SecretUnavailableError, match="control characters") as info:
            resolve_secret(ref)
        assert ref in str(info.value)
        assert "abc" not in str(info.value)
        assert "Injected" not in str(info.value)
