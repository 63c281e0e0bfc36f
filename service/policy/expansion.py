"""Which environment variables a config file's `${NAME}` may expand: the operator's allow-list
(SUSTAIN_CONFIG_ENV), a pure value.

Whoever may edit the config file (a ConfigMap, a repository) may not be allowed to read the
service's environment, yet an expanded value is stored, shown to viewers in the API, exported
as metric labels and sent to endpoints. So `${NAME}` expands only names the operator listed
(fnmatch globs, case-sensitive, as SUSTAIN_SECRET_ENV), and never sustain's own or database
variables, a variable holding one of sustain's credentials, nor one SUSTAIN_SECRET_ENV allows:
a secret is named by an `env:NAME` reference, resolved when it is used and never stored.
Reasons name the rule, never a value.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field

from sustain.probes.client.secret_policy import FORBIDDEN_ENV, SecretPolicy


@dataclass(frozen=True, slots=True)
class ExpansionPolicy:
    """The variables `${NAME}` may expand. The default expands none."""

    env_globs: tuple[str, ...] = ()
    """Names or fnmatch globs (case-sensitive) of the expandable variables."""
    secrets: SecretPolicy = field(default_factory=SecretPolicy)
    """The secret policy of the same settings: the names it lets `env:` references read and
    sustain's own credentials are never expanded."""

    def refusal(self, name: str, environ: Mapping[str, str]) -> str | None:
        """Why `${name}` may not be expanded, or None. Judged on the name whether or not the
        variable is set (and whatever default the reference gives), so a file is valid or not
        on every replica alike; `environ` serves only to refuse a variable holding one of
        sustain's credentials."""
        if any(fnmatch.fnmatchcase(name, glob)
               for glob in (*FORBIDDEN_ENV, *self.secrets.forbidden_env)):
            return "sustain's own and database variables (SUSTAIN_*, *DATABASE_URL*, PG*, " \
                "POSTGRES_*) are never expanded"
        if any(fnmatch.fnmatchcase(name, glob) for glob in self.secrets.env_globs):
            return "SUSTAIN_SECRET_ENV lists it as a secret: name it in a *_secret_ref as " \
                f"env:{name} instead"
        if not any(fnmatch.fnmatchcase(name, glob) for glob in self.env_globs):
            return "not in SUSTAIN_CONFIG_ENV"
        if self.secrets.holds_forbidden(environ.get(name)):
            return "the variable holds one of sustain's own credentials"
        return None
