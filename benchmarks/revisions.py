"""Earlier revisions of this repository, for the benchmarks' before-and-after comparisons.

A revision given on the command line is checked before anything runs (:func:`resolve`): it
must name a commit of this repository, and it is never passed where git could read it as an
option (``--end-of-options``).  :func:`file_at` reads one file as it was; :func:`checked_out`
writes the whole tree as it was into a temporary folder (``git archive``: the repository's
own worktrees, index and branches are left alone).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _git(repo: Path, *arguments: str, binary: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *arguments], cwd=repo, capture_output=True, text=not binary, check=False
    )


def resolve(revision: str, repo: Path) -> str:
    """The full commit id ``revision`` names in the repository at ``repo``.

    ``ValueError`` (one line, naming the revision) for an empty revision, one that starts
    with ``-`` (git would read it as an option) or one that names no commit here.
    """
    if not revision.strip():
        raise ValueError("the revision is empty; give a commit such as 7c696d6 or HEAD~3")
    if revision.startswith("-"):
        raise ValueError(
            f"{revision!r} is not a revision: it starts with '-' (give a commit such as 7c696d6)"
        )
    completed = _git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    if completed.returncode != 0:
        raise ValueError(f"{revision!r} names no commit in {repo}")
    return completed.stdout.strip()


def file_at(commit: str, path: str, repo: Path) -> str:
    """The text of ``path`` at ``commit`` (a full id from :func:`resolve`)."""
    completed = _git(repo, "show", "--end-of-options", f"{commit}:{path}")
    if completed.returncode != 0:
        raise ValueError(f"cannot read {path} at {commit[:12]}: {completed.stderr.strip()}")
    return completed.stdout


@contextmanager
def checked_out(commit: str, repo: Path) -> Iterator[Path]:
    """The tree of ``commit`` (a full id from :func:`resolve`) in a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix=f"ppo-at-{commit[:12]}-"))
    try:
        archive = _git(repo, "archive", "--format=tar", "--end-of-options", commit, binary=True)
        if archive.returncode != 0:
            raise ValueError(f"cannot check out {commit[:12]}: {archive.stderr.decode().strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(folder, filter="data")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
