"""Which secret references may be resolved: the operator's allow-list, a pure value.

A reference names where a secret is (`env:NAME`, `file:/path`), and whoever creates an
endpoint or notifier chooses it; without a policy, `env:SUSTAIN_DATABASE_URL` or
`file:/proc/self/environ` would send sustain's own credentials to a host of the caller's
choice. So `env:NAME` resolves only when NAME matches one of the allowed names or globs
(SUSTAIN_SECRET_ENV; fnmatch, case-sensitive) and is not one of sustain's own (SUSTAIN_*,
database variables) nor holds one of its credentials; `file:/path` only when the path, links
resolved, is under the secret directory (SUSTAIN_SECRET_DIR), and never under /proc, /sys or
/dev. Reasons name the reference and the rule, never a value.

"Holds" means contains, not only equals: `x-PASSWORD-y` or a URL with the password inside
would otherwise carry the credential past an exact comparison. Containment is judged for
credentials of at least MIN_CONTAINED_CHARS characters; a shorter one (a 1-character password
would forbid every value holding that character) is refused only as the whole value.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote

from sustain.probes.local_files import in_system_dir, within

FORBIDDEN_ENV = ("SUSTAIN_*", "*DATABASE_URL*", "PG*", "POSTGRES_*")
"""Never readable, whatever the allow-list says: sustain's own settings (its database URL and
admin key among them) and the variables PostgreSQL clients and images read credentials from."""
ENV_GLOB = re.compile(r"^[A-Za-z0-9_*?\[\]!-]+$")
"""What an allow-list entry may hold: variable-name characters and fnmatch wildcards."""
MIN_CONTAINED_CHARS = 8
"""A credential at least this long (characters) is refused anywhere inside a value; a shorter
one only as the whole value (stripped), so a short password does not forbid every value that
happens to hold its characters."""


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables FORBIDDEN_ENV names: what a process sustain starts to
    talk to endpoints (a measurement worker, a scraper) gets."""
    return {name: value for name, value in environ.items()
            if not any(fnmatch.fnmatchcase(name, glob) for glob in FORBIDDEN_ENV)}


def parse_env_globs(text: str) -> tuple[str, ...]:
    """The comma-separated names or globs of SUSTAIN_SECRET_ENV; ValueError names a bad one."""
    globs = tuple(entry.strip() for entry in text.split(",") if entry.strip())
    for glob in globs:
        if not ENV_GLOB.match(glob):
            raise ValueError(f"{glob!r} is not an environment variable name or glob")
    return globs


@dataclass(frozen=True, slots=True)
class SecretPolicy:
    """Where secret references may point. The default allows nothing."""

    env_globs: tuple[str, ...] = ()
    """Names or fnmatch globs (case-sensitive) of the readable environment variables."""
    secret_dir: Path | None = None
    """`file:` references must resolve under this directory; None: no file is readable."""
    forbidden_env: tuple[str, ...] = FORBIDDEN_ENV
    forbidden_values: frozenset[str] = field(default=frozenset(), repr=False)
    """sustain's own credentials (the database URL, its password, the admin key): a variable
    or file holding one of them is refused, whatever its name."""
    forbidden_digests: frozenset[str] = field(default=frozenset(), repr=False)
    """The same, as SHA-256 hex digests: what a measurement worker is given, so that the
    credentials themselves never reach the process that talks to endpoints."""
    forbidden_lengths: frozenset[int] = field(default=frozenset(), repr=False)
    """The lengths (characters) of the credentials behind `forbidden_digests`: a value is
    searched for them by hashing each of its substrings of those lengths."""

    def without_values(self) -> SecretPolicy:
        """This policy with its forbidden values kept only as digests and lengths (for a
        worker)."""
        return replace(
            self, forbidden_values=frozenset(),
            forbidden_digests=frozenset(
                {*self.forbidden_digests, *(_digest(v) for v in self.forbidden_values)}),
            forbidden_lengths=frozenset(
                {*self.forbidden_lengths, *(len(v) for v in self.forbidden_values)}))

    def check(self, ref: str, environ: Mapping[str, str] | None = None) -> str | None:
        """Why `ref` may not be resolved, or None. With `environ`, a variable holding one of
        the forbidden values is refused too (create time passes os.environ)."""
        kind, _, name = ref.partition(":")
        if kind == "env":
            return self._check_env(name, environ)
        if kind == "file":
            return self._check_file(name)
        return "not a secret reference (env:NAME or file:/path)"

    def _check_env(self, name: str, environ: Mapping[str, str] | None) -> str | None:
        if any(fnmatch.fnmatchcase(name, glob) for glob in self.forbidden_env):
            return "sustain's own and database variables (SUSTAIN_*, *DATABASE_URL*, PG*, " \
                "POSTGRES_*) are never readable"
        if not any(fnmatch.fnmatchcase(name, glob) for glob in self.env_globs):
            return "not in SUSTAIN_SECRET_ENV"
        if environ is not None and self.holds_forbidden(environ.get(name)):
            return "the variable holds one of sustain's own credentials"
        return None

    def _check_file(self, path: str) -> str | None:
        if not os.path.isabs(path):
            return "the path must be absolute"
        if in_system_dir(path):
            return "files under /proc, /sys and /dev are never readable"
        if self.secret_dir is None:
            return "file: references are not allowed here"
        if not within(path, self.secret_dir):
            return f"not under SUSTAIN_SECRET_DIR ({self.secret_dir})"
        return None

    def holds_forbidden(self, value: str | None) -> bool:
        """Whether a value is, or contains, one of sustain's own credentials (see the module:
        containment for those of MIN_CONTAINED_CHARS or more). With digests only, each
        substring of a forbidden length is hashed: len(value) hashes per length, at most a
        few per credential (a 64 KiB secret file and four credentials: ~256 thousand)."""
        if not value:
            return False
        stripped = value.strip()
        if stripped in self.forbidden_values or any(
                len(v) >= MIN_CONTAINED_CHARS and v in value for v in self.forbidden_values):
            return True
        if not self.forbidden_digests:
            return False
        if _digest(stripped) in self.forbidden_digests:
            return True
        return any(_digest(value[i:i + length]) in self.forbidden_digests
                   for length in self.forbidden_lengths if length >= MIN_CONTAINED_CHARS
                   for i in range(len(value) - length + 1))


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def own_credentials(*values: str | None) -> frozenset[str]:
    """The forbidden values of a SecretPolicy: the given credentials and, for a URL, its
    password (postgresql://user:PASSWORD@host/db), without empty ones."""
    found: set[str] = set()
    for value in values:
        if not value:
            continue
        found.add(value.strip())
        match = re.match(r"^[a-z][a-z0-9+.-]*://[^:/@]*:([^@/]+)@", value.strip())
        if match:
            found.update((match.group(1), unquote(match.group(1))))
    return frozenset(v for v in found if v)
