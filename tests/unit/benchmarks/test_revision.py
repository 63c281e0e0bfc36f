"""A commit laid out as an import root: a child process with it on PYTHONPATH imports that
commit's `sustain`, not this checkout's editable install."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.revision import REPO, commit_of, import_root, imported_from

ASK = ("import sys; sys.path.insert(0, sys.argv[1]); "
       "from benchmarks.revision import imported_from; print(imported_from())")


def test_a_child_imports_the_commit_s_sustain_from_its_import_root() -> None:
    with import_root("HEAD") as root:
        done = subprocess.run([sys.executable, "-c", ASK, str(REPO)], capture_output=True,
                              text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(root)})
        child = done.stdout.strip()
        assert child.startswith(str(root.parent)), child
        assert (root / "sustain" / "probes" / "client" / "sse.py").is_file()
    assert not root.exists(), "removed on exit"
    assert imported_from() != child


def test_a_name_of_no_commit_is_refused() -> None:
    with pytest.raises(ValueError, match="names no commit"):
        commit_of("no-such-revision-anywhere")
