"""A measurement worker gets a secret policy that still refuses sustain's own credentials,
without holding them."""

from __future__ import annotations

import pickle

from sustain.probes.client.secret_policy import SecretPolicy


def test_a_policy_for_a_worker_refuses_the_credentials_without_holding_them() -> None:
    policy = SecretPolicy(env_globs=("X_*",), forbidden_values=frozenset({"hunter2"}))
    for_worker = policy.without_values()
    assert for_worker.forbidden_values == frozenset()
    assert for_worker.holds_forbidden(" hunter2\n")
    assert not for_worker.holds_forbidden("something else")
    assert b"hunter2" not in pickle.dumps(for_worker)
    assert for_worker.check("env:X_TOKEN", {"X_TOKEN": "hunter2"}) is not None
