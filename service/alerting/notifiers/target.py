"""A notifier resolved for sending: its secret references read now (never stored) and its
URL checked against the egress policy, whatever its kind.

Secret references resolve only where the secret policy allows, and the URL is checked against
the egress policy before sending (a URL held behind url_secret_ref could not be checked when
the notifier was created); the client itself refuses denied addresses at connect time. Such
refusals fail the delivery at once: retrying cannot help until the operator's settings
change. Error texts name the reference, never the URL (a Slack URL is a secret) or a
secret."""

from __future__ import annotations

from dataclasses import dataclass

from sustain.probes.client.secrets import (
    SecretRefusedError,
    SecretUnavailableError,
    resolve_secret,
)
from sustain.service.alerting.notifiers.transport import Outcome
from sustain.service.policy.reach import EGRESS_SETTINGS, Reach


@dataclass(frozen=True, slots=True)
class Target:
    """A notifier, resolved for sending (secrets read now, never stored)."""

    name: str
    kind: str
    url: str
    signing_secret: str | None
    timeout_s: float


def resolve(name: str, kind: str, url: str | None, url_secret_ref: str | None,
            signing_secret_ref: str | None, timeout_s: float, reach: Reach
            ) -> Target | Outcome:
    """The target to send to, or an outcome naming the secret that is missing (retryable) or
    that the policy refuses, or saying the URL may not be reached (final). An error about a
    URL held behind url_secret_ref names the reference, never the URL or its host."""
    try:
        real_url = url if url is not None else resolve_secret(url_secret_ref or "",
                                                              reach.secrets)
        secret = None if signing_secret_ref is None \
            else resolve_secret(signing_secret_ref, reach.secrets)
    except SecretRefusedError as exc:
        return Outcome(False, error=str(exc))
    except SecretUnavailableError as exc:
        return Outcome(False, error=str(exc), retryable=True)
    reason = reach.egress.check_url(real_url)
    if reason is not None:
        where = reason if url is not None else f"the URL of {url_secret_ref} is not allowed"
        return Outcome(False, error=f"egress denied: {where} ({EGRESS_SETTINGS})")
    return Target(name, kind, real_url, secret, timeout_s)
