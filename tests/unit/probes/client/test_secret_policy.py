"""A measurement worker gets a secret policy that still refuses sustain's own credentials,
without holding them; and a value is refused when it contains one (of MIN_CONTAINED_CHARS or
more), not only when it equals one."""

from __future__ import annotations

import pickle

import pytest

from sustain.probes.client.secret_policy import MIN_CONTAINED_CHARS, SecretPolicy, own_credentials


def test_a_policy_for_a_worker_refuses_the_credentials_without_holding_them() -> None:
    policy = SecretPolicy(env_globs=("X_*",), forbidden_values=frozenset({"hunter2"}))
    for_worker = policy.without_values()
    assert for_worker.forbidden_values == frozenset()
    assert for_worker.holds_forbidden(" hunter2\n")
    assert not for_worker.holds_forbidden("something else")
    assert b"hunter2" not in pickle.dumps(for_worker)
    assert for_worker.check("env:X_TOKEN", {"X_TOKEN": "hunter2"}) is not None


ADMIN = "sk_sustain_GkpUulWzwJXiwbGA4XlqVJhAstehuU53ztfrvFLoLuk"
DB_URL = "postgresql://sustain:pg-pass-0123@db:5432/sustain"


def policies() -> list[SecretPolicy]:
    """The service's policy, and a worker's (digests and lengths only)."""
    policy = SecretPolicy(forbidden_values=own_credentials(DB_URL, ADMIN))
    return [policy, policy.without_values()]


@pytest.mark.parametrize("value", [
    f"x-{ADMIN}-y", f"Bearer {ADMIN}", "x-pg-pass-0123-y",
    "postgresql://other:pg-pass-0123@elsewhere:5432/db", f"prefix {DB_URL}",
    "pg-pass-0123", f" {ADMIN}\n"])
def test_a_value_containing_a_credential_is_forbidden(value: str) -> None:
    for policy in policies():
        assert policy.holds_forbidden(value)


def test_a_short_credential_is_forbidden_only_as_the_whole_value() -> None:
    assert len("sustain") < MIN_CONTAINED_CHARS
    policy = SecretPolicy(forbidden_values=own_credentials(
        "postgresql://sustain:sustain@db:5432/sustain"))
    for checked in (policy, policy.without_values()):
        assert checked.holds_forbidden(" sustain ")
        assert not checked.holds_forbidden("sustain-demo endpoint")


def test_a_value_without_a_credential_is_not_forbidden() -> None:
    for policy in policies():
        assert not policy.holds_forbidden("http://127.0.0.1:9/v1")
        assert not policy.holds_forbidden("pg-pass-012")  # a part of one is not one
        assert not policy.holds_forbidden("")
        assert not policy.holds_forbidden(None)


def test_a_variable_containing_a_credential_is_refused_by_name_never_by_value() -> None:
    policy = SecretPolicy(env_globs=("X_*",), forbidden_values=own_credentials(DB_URL, ADMIN))
    for checked in (policy, policy.without_values()):
        reason = checked.check("env:X_TOKEN", {"X_TOKEN": f"token-{ADMIN}"})
        assert reason == "the variable holds one of sustain's own credentials"
        assert ADMIN not in reason
