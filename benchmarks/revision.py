"""Another commit of sustain as an import root, so a benchmark can measure it side by side with
this checkout in the same run: the commit's files from `git archive`, laid out as its
pyproject.toml's `package-dir` maps them under `sustain`, in a temporary folder. A child
process with that folder first on PYTHONPATH imports the commit's `sustain` (this checkout's
is an editable install, found after PYTHONPATH); `imported_from` is how the child proves it."""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def commit_of(rev: str) -> str:
    """The full hash `rev` names in this repository (a ValueError if it names none)."""
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ValueError(f"{rev!r} names no commit here: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def import_root(rev: str) -> Iterator[Path]:
    """A folder holding commit `rev`'s `sustain` package; removed on exit."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar",
                              commit_of(rev)], capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix="sustain-rev-") as folder:
        tree = Path(folder) / "tree"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        mapping = tomllib.loads((tree / "pyproject.toml").read_text())[
            "tool"]["setuptools"]["package-dir"]
        root = Path(folder) / "root"
        top = root / "sustain"
        top.mkdir(parents=True)
        for entry in (tree / mapping["sustain"]).iterdir():  # the root package's own files
            top.joinpath(entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        for package, source in mapping.items():  # sustain.probes = probes/, and so on
            if package.count(".") == 1:
                top.joinpath(package.split(".")[1]).symlink_to(tree / source,
                                                               target_is_directory=True)
        yield root


def imported_from() -> str:
    """The folder this process's `sustain.probes` was imported from, links resolved."""
    import sustain.probes

    return str(Path(sustain.probes.__file__).resolve().parent)
